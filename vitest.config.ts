import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts", "e2e/**/*.test.ts"],
    // Long and timing-sensitive: `npm run test:chaos` (vitest.chaos.config.ts); minutes of load:
    // `npm run test:load` (vitest.load.config.ts).
    exclude: [...configDefaults.exclude, "e2e/chaos/**", "e2e/load/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The dashboard's expect.poll waits on pages that update from a live cluster; on a busy
    // machine a second is not enough, and a wait that succeeds ends as soon as it does.
    expect: { poll: { timeout: 10_000 } },
    // Each file makes its own database and Redis prefix, so files can run side by side.
    pool: "forks",
    // Two files at a time: the machine's two cores are the bound. Files in one fork share its
    // loaded modules (no isolation), which saves importing the kit and the code again for each
    // of some 190 files, about a sixth of the suite's CPU; a file leaves no global state behind
    // (fake timers, environment, mocks) for the next one.
    isolate: false,
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    globalSetup: ["testkit/global-setup.ts"],
  },
});
