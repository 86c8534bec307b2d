#!/usr/bin/env node
// The `octoprox` bin: runs the CLI built whole (dist/control/cli.mjs), which loads on about a
// third of the CPU the sources take through tsx. A missing or stale build is made first, through tsx,
// so a clone needs no build step (scripts/build-control.ts).
import { pathToFileURL } from "node:url";
import { controlBuildFresh, controlBundlePath } from "../../scripts/control-build-fresh.js";

if (!controlBuildFresh("cli")) {
  const { register } = await import("tsx/esm/api");
  register();
  const { ensureControlBuild } = await import("../../scripts/build-control.ts");
  await ensureControlBuild("cli");
}
process.setSourceMapsEnabled(true);
await import(pathToFileURL(controlBundlePath("cli")).href);
