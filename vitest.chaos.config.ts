import { defineConfig } from "vitest/config";

/**
 * The chaos suite (e2e/chaos): long and timing-sensitive, so not part of `npm test`; run by
 * `npm run test:chaos`. One file at a time: its cases share one cluster and run in turn.
 */
export default defineConfig({
  test: {
    include: ["e2e/chaos/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 240_000,
    pool: "forks",
    poolOptions: { forks: { maxForks: 1, minForks: 1 } },
    globalSetup: ["testkit/global-setup.ts"],
  },
});
