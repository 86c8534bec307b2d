/**
 * The real gateway entry (gateway/main.ts under Deno, with the permissions `npm start` gives it)
 * and its TLS interception CA, loaded before anything else:
 *
 * - without one (the settings unset), with a file that does not exist, is a folder, cannot be
 *   read by its user (not as root), or lies outside what the gateway may read, with a
 *   certificate that is not a CA, one out of its validity, or a key that is not the
 *   certificate's, it exits 2 at once with one line naming the setting and the path, before any
 *   listener binds;
 * - with a good CA (and two isolates, each loading the CA the main isolate read) it starts, logs
 *   the CA it loaded, and /metrics carries the CA's end (promtool passes the text);
 * - a CA that expires within 30 days is warned of at start;
 * - after a rotation, while the overlap lasts it signs with the previous CA (and checks the
 *   current one all the same); once the overlap ended, with the current one, the previous files
 *   not read; a previous key that is not its certificate's is refused naming its setting, and the
 *   previous CA's settings one without the others are a bad setting.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DENO_BIN, gatewayRunArgs } from "../../scripts/gateway-command.ts";
import { type CaPem, createCa, loadCa } from "../../shared/tls/ca.ts";
import {
  collectLogLines,
  gatewayEnv,
  type LogLine,
} from "../../testkit/gateway/fixture-gateway.ts";
import { testMitmCa } from "../../testkit/mitm-ca.ts";
import { ROOT } from "../../testkit/processes.ts";
import { parseSamples, promtoolCheck } from "../../testkit/promtool.ts";
import { testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const CERT = "OCTOPROX_TLS_MITM_CA_CERT_PATH";
const KEY = "OCTOPROX_TLS_MITM_CA_KEY_PATH";
const EXPIRY = "octoprox_gateway_tls_mitm_ca_expiry_timestamp_seconds";
const DAY_MS = 86_400_000;

let dir: string;
let other: CaPem;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-gateway-ca-"));
  other = await createCa();
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text, { mode: 0o600 });
  return path;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the gateway on `ca` (its two settings) until it exits, at most 20 s. `readable` is the
 * environment its permissions are computed from (the same as its own unless a test says).
 */
function runToExit(
  ca: Record<string, string>,
  readable: Record<string, string> = ca,
): Promise<Run> {
  const env = gatewayEnv(ca);
  const child = spawn(DENO_BIN, gatewayRunArgs(gatewayEnv(readable)), {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  return new Promise((resolve) =>
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    })
  );
}

/** One line on standard error naming the setting and the path, exit 2, nothing bound. */
function expectRefused(run: Run, message: RegExp): void {
  expect(run.code, run.stderr + run.stdout).toBe(2);
  const lines = run.stderr.trim().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^octoprox-gateway: /);
  expect(lines[0]).toMatch(message);
  expect(run.stdout).not.toContain("listener bound");
  // The key's text is never written out, whatever went wrong.
  expect(run.stderr + run.stdout).not.toContain("PRIVATE KEY");
}

describe("a gateway without a CA it can use", () => {
  it("does not start with the settings unset, naming both", async () => {
    expectRefused(
      await runToExit({ [CERT]: "", [KEY]: "" }),
      new RegExp(`${CERT} and ${KEY} are unset: the gateway does not start without its TLS`),
    );
  });

  it("does not start with a missing file, naming the setting and the path", async () => {
    const missing = join(dir, "missing-key.pem");
    const cert = await file("missing-key-cert.pem", testMitmCa().certPem);
    expectRefused(
      await runToExit({ [CERT]: cert, [KEY]: missing }),
      new RegExp(`^octoprox-gateway: ${KEY}: ${missing} does not exist; the gateway does not`),
    );
  });

  it("does not start with a folder where a file should be", async () => {
    expectRefused(
      await runToExit({ [CERT]: testMitmCa().certPath, [KEY]: dir }),
      new RegExp(`${KEY}: ${dir} is not a regular file; the gateway does not start`),
    );
  });

  it("does not start with a file outside what it may read (--allow-read)", async () => {
    const cert = await file("outside-cert.pem", testMitmCa().certPem);
    const key = await file("outside-key.pem", testMitmCa().keyPem);
    // Permissions granted for the test CA's own files; the settings name copies elsewhere.
    expectRefused(
      await runToExit({ [CERT]: cert, [KEY]: key }, { [CERT]: testMitmCa().certPath }),
      new RegExp(`${CERT}: ${cert} is outside what the gateway may read`),
    );
  });

  it("does not start with a certificate that is not a CA", async () => {
    const leaf = await (await loadCa(testMitmCa())).mint("leaf.example");
    const cert = await file("leaf.pem", leaf.certPem);
    expectRefused(
      await runToExit({ [CERT]: cert, [KEY]: testMitmCa().keyPath }),
      new RegExp(
        `${CERT}: the TLS interception CA cannot be used: ${cert} is not a CA certificate ` +
          `\\(basicConstraints CA:TRUE\\) \\(${CERT}=${cert}, ${KEY}=${testMitmCa().keyPath}\\)`,
      ),
    );
  });

  it("does not start with a key that is not its certificate's", async () => {
    const key = await file("other-key.pem", other.keyPem);
    expectRefused(
      await runToExit({ [CERT]: testMitmCa().certPath, [KEY]: key }),
      new RegExp(`${KEY}: the TLS interception CA cannot be used: ${key} is not the key of `),
    );
  });

  it("does not start with a CA past its end", async () => {
    // Made eleven years ago: ten years of validity ended a year back.
    const old = await createCa({ now: new Date(Date.now() - 11 * 365 * DAY_MS) });
    const cert = await file("expired.pem", old.certPem);
    const key = await file("expired-key.pem", old.keyPem);
    expectRefused(
      await runToExit({ [CERT]: cert, [KEY]: key }),
      new RegExp(
        `${CERT}: the TLS interception CA cannot be used: ${cert} is valid from .* not now`,
      ),
    );
  });
});

/** A gateway on a Redis prefix with no feed: it starts (status listener, isolates), unready. */
async function startWith(ca: Record<string, string>, isolates = "1") {
  const env = gatewayEnv({
    OCTOPROX_REDIS_URL: process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
    OCTOPROX_REDIS_PREFIX: testPrefix(),
    OCTOPROX_GATEWAY_ISOLATES: isolates,
    ...ca,
  });
  const child = spawn(DENO_BIN, gatewayRunArgs(env), {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: LogLine[] = [];
  let stderr = "";
  collectLogLines(child.stdout!, lines);
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const line = (msg: string) =>
    waitUntil(() => {
      if (child.exitCode !== null) throw new Error(`gateway exited: ${stderr}`);
      return lines.find((entry) => entry.msg === msg);
    }, { timeoutMs: 20_000, message: `the gateway's "${msg}"` });
  const status = Number((await line("Status listener bound")).port);
  await line("Gateway started; the proxy port opens with the first feed");
  return {
    lines,
    line,
    metrics: async () => await (await fetch(`http://127.0.0.1:${status}/metrics`)).text(),
    async stop() {
      child.kill("SIGTERM");
      return await exited;
    },
  };
}

describe("a gateway with a good CA", () => {
  it("starts on it in every isolate, logs it, and carries its end on /metrics", async () => {
    const ca = await loadCa(testMitmCa());
    const gateway = await startWith({
      [CERT]: testMitmCa().certPath,
      [KEY]: testMitmCa().keyPath,
    }, "2");
    try {
      expect(await gateway.line("TLS interception CA loaded")).toMatchObject({
        level: "info",
        cert_path: testMitmCa().certPath,
        subject: ca.certificate.subject,
        not_after: ca.notAfter.toISOString(),
        spki_sha256: ca.spkiSha256,
      });
      // The worker isolate loaded the CA it was handed: none was left out.
      expect(gateway.lines.filter((l) => l.level === "warn" && /isolate/.test(l.msg))).toEqual([]);
      expect(gateway.lines.filter((l) => /expires|expired/.test(l.msg))).toEqual([]);
      const text = await gateway.metrics();
      const checked = await promtoolCheck(text);
      expect(checked.output).toBe("");
      expect(checked.code).toBe(0);
      const expiry = parseSamples(text).filter((sample) => sample.name === EXPIRY);
      expect(expiry.map((sample) => sample.value)).toEqual([
        Math.floor(ca.notAfter.getTime() / 1000),
      ]);
      expect(text).toContain(`# TYPE ${EXPIRY} gauge`);
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  });

  it("warns at start of a CA that expires within 30 days", async () => {
    // Ten years less twenty days ago: twenty days left.
    const soon = await createCa({ now: new Date(Date.now() - (3652 - 20) * DAY_MS) });
    const cert = await file("soon.pem", soon.certPem);
    const key = await file("soon-key.pem", soon.keyPem);
    const ca = await loadCa(soon);
    const gateway = await startWith({ [CERT]: cert, [KEY]: key });
    try {
      const warned = await gateway.line(
        "The TLS interception CA expires within 30 days; rotate it (docs/tls-interception.md)",
      );
      expect(warned).toMatchObject({
        level: "warn",
        not_after: ca.notAfter.toISOString(),
        spki_sha256: ca.spkiSha256,
      });
      expect(warned.days_left).toBeGreaterThanOrEqual(18);
      expect(warned.days_left).toBeLessThan(30);
      const expiry = parseSamples(await gateway.metrics()).find((s) => s.name === EXPIRY);
      expect(expiry?.value).toBe(Math.floor(ca.notAfter.getTime() / 1000));
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  });
});

describe("a gateway after a rotation", () => {
  let previousCert: string;
  let previousKey: string;
  let previous: Awaited<ReturnType<typeof loadCa>>;
  const PREVIOUS_CERT = "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH";
  const PREVIOUS_KEY = "OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH";
  const UNTIL = "OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL";

  beforeAll(async () => {
    const pem = await createCa();
    previous = await loadCa(pem);
    previousCert = await file("previous.pem", pem.certPem);
    previousKey = await file("previous-key.pem", pem.keyPem);
  });

  const rotated = (until: Date, files: { cert?: string; key?: string } = {}) => ({
    [CERT]: testMitmCa().certPath,
    [KEY]: testMitmCa().keyPath,
    [PREVIOUS_CERT]: files.cert ?? previousCert,
    [PREVIOUS_KEY]: files.key ?? previousKey,
    [UNTIL]: until.toISOString(),
  });

  it("signs with the previous CA while the overlap lasts", async () => {
    const current = await loadCa(testMitmCa());
    const until = new Date(Date.now() + 7 * DAY_MS);
    const gateway = await startWith(rotated(until), "2");
    try {
      expect(await gateway.line("TLS interception CA loaded")).toMatchObject({
        cert_path: previousCert,
        spki_sha256: previous.spkiSha256,
        signing: "previous",
      });
      expect(
        await gateway.line(
          "Signing with the previous TLS interception CA while the rotation's overlap lasts; " +
            "a start after it signs with the current one",
        ),
      ).toMatchObject({
        overlap_until: until.toISOString(),
        current_spki_sha256: current.spkiSha256,
      });
      expect(gateway.lines.filter((l) => l.level === "warn" && /isolate/.test(l.msg))).toEqual([]);
      const expiry = parseSamples(await gateway.metrics()).find((s) => s.name === EXPIRY);
      expect(expiry?.value).toBe(Math.floor(previous.notAfter.getTime() / 1000));
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  });

  it("signs with the current CA once the overlap ended, without reading the previous files", async () => {
    const current = await loadCa(testMitmCa());
    const until = new Date(Date.now() - 1000);
    const gone = join(dir, "gone-previous.pem");
    const gateway = await startWith(rotated(until, { cert: gone, key: gone }));
    try {
      expect(await gateway.line("TLS interception CA loaded")).toMatchObject({
        cert_path: testMitmCa().certPath,
        spki_sha256: current.spkiSha256,
        signing: "current",
      });
      await gateway.line(
        "The rotation's overlap has ended: signing with the current TLS interception CA (the " +
          "previous CA's settings can go)",
      );
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  });

  it("does not start with a previous key that is not the previous certificate's", async () => {
    const wrong = await file("wrong-previous-key.pem", other.keyPem);
    expectRefused(
      await runToExit(rotated(new Date(Date.now() + DAY_MS), { key: wrong })),
      new RegExp(
        `^octoprox-gateway: ${PREVIOUS_KEY}: the TLS interception CA cannot be used: ${wrong} ` +
          `is not the key of ${previousCert} \\(${PREVIOUS_CERT}=${previousCert}, ` +
          `${PREVIOUS_KEY}=${wrong}\\)$`,
      ),
    );
  });

  it("does not start with the previous CA's settings one without the others", async () => {
    const run = await runToExit({ ...rotated(new Date(Date.now() + DAY_MS)), [PREVIOUS_KEY]: "" });
    expectRefused(
      run,
      new RegExp(`${PREVIOUS_CERT}, ${PREVIOUS_KEY} and ${UNTIL} must be set together`),
    );
  });
});
