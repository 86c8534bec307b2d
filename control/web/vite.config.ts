/**
 * The dashboard's build: a single-page app (Preact, preact-iso's router, uPlot) into the
 * checkout's dist/web, which the api serves (control/api/web-static.ts). Hashed file names under
 * assets/, so the api can let browsers keep them.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/",
  // The app's JSX is Preact's (tsconfig.json says the same to tsc).
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../../dist/web", import.meta.url)),
    emptyOutDir: true,
    assetsDir: "assets",
    // Source maps stay out of the served files; the budget counts what a browser loads.
    sourcemap: false,
    chunkSizeWarningLimit: 250,
  },
  server: { proxy: { "/api": "http://127.0.0.1:8000" } },
  logLevel: "warn",
});
