import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts", "e2e/**/*.test.ts"],
    // Long and timing-sensitive: `npm run test:chaos` (vitest.chaos.config.ts).
    exclude: [...configDefaults.exclude, "e2e/chaos/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file makes its own database and Redis prefix, so files can run side by side.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    globalSetup: ["testkit/global-setup.ts"],
  },
});
