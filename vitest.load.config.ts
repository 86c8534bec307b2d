import { defineConfig } from "vitest/config";

/**
 * The load runs (e2e/load): minutes of CPU each, so not part of `npm test`; run by
 * `npm run test:load` (and CI). One file at a time: each is the machine's whole load.
 */
export default defineConfig({
  test: {
    include: ["e2e/load/**/*.test.ts"],
    testTimeout: 300_000,
    hookTimeout: 240_000,
    pool: "forks",
    poolOptions: { forks: { maxForks: 1, minForks: 1 } },
    globalSetup: ["testkit/global-setup.ts"],
  },
});
