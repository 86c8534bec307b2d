/**
 * The cloud SDKs (@aws-sdk/client-ec2, @azure/*) load at a cloud connector's first call, not at a
 * start: together they cost about two seconds of CPU to load, which every CLI command and every
 * control process would pay for clouds it may never call. A probe loaded first lists, as the
 * process exits, the CommonJS modules it loaded (both SDKs are CommonJS under Node).
 */
import { describe, expect, it } from "vitest";
import { controlCommand, ensureControlBuild, probedStart } from "../../scripts/build-control.ts";
import { controlBundlePath } from "../../scripts/control-build-fresh.js";

const LOADED_PROBE = "data:text/javascript," + encodeURIComponent(
  'import { createRequire } from "node:module";' +
    'process.on("exit", () => process.stderr.write(`loaded ${JSON.stringify(' +
    'Object.keys(createRequire("/").cache))}\\n`));',
);

const CLOUD_SDK = /node_modules\/@(aws-sdk|azure)\//;

/** The modules a start of `node ...args` loaded, with no OCTOPROX_* setting. */
async function modulesLoaded(args: readonly string[]): Promise<string[]> {
  const stderr = await probedStart(LOADED_PROBE, args);
  const line = stderr.split("\n").find((each) => each.startsWith("loaded "));
  if (line === undefined) throw new Error(`no list of loaded modules: ${stderr}`);
  return JSON.parse(line.slice("loaded ".length)) as string[];
}

describe("starts that load no cloud SDK", () => {
  it("a CLI command", async () => {
    await ensureControlBuild("cli");
    const loaded = await modulesLoaded([controlBundlePath("cli"), "--version"]);
    // The probe sees CommonJS packages: the CLI's own (commander's) are there.
    expect(loaded.some((path) => path.includes("node_modules/commander/"))).toBe(true);
    expect(loaded.filter((path) => CLOUD_SDK.test(path))).toEqual([]);
  });

  it("a control process, every module loaded up to its settings check", async () => {
    await ensureControlBuild("main");
    const [, ...args] = controlCommand();
    const loaded = await modulesLoaded(args);
    expect(loaded.some((path) => path.includes("node_modules/ioredis/"))).toBe(true);
    expect(loaded.filter((path) => CLOUD_SDK.test(path))).toEqual([]);
  });
});
