/**
 * The CA tool (`npm run ca:create`, scripts/ca.ts) as compose's `tls-ca` service and an operator
 * run it: it makes the CA where the settings (or --cert and --key) say, the key 0600 in a private
 * folder, and prints the subject, the end and the SPKI hash; run again it keeps and checks the
 * same CA; a certificate without its key is refused (exit 1, naming both), never replaced; a
 * wrong command line exits 2.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadCa } from "../../shared/tls/ca.ts";
import { ROOT } from "../../testkit/processes.ts";

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-ca-tool-"));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Runs scripts/ca.ts with `args`, the environment's OCTOPROX_* replaced by `env`. */
function caTool(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("OCTOPROX_")),
  );
  const child = spawn(join(ROOT, "node_modules", ".bin", "tsx"), ["scripts/ca.ts", ...args], {
    cwd: ROOT,
    env: { ...clean, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stdout, stderr })));
}

describe("npm run ca:create", () => {
  it("makes the CA where the settings say, then keeps it", async () => {
    const cert = join(dir, "certs", "mitm-ca.pem");
    const key = join(dir, "keys", "mitm-ca-key.pem");
    const env = { OCTOPROX_TLS_MITM_CA_CERT_PATH: cert, OCTOPROX_TLS_MITM_CA_KEY_PATH: key };
    const made = await caTool(["create"], env);
    expect(made.stderr).toBe("");
    expect(made.code).toBe(0);
    const ca = await loadCa({
      certPem: await readFile(cert, "utf8"),
      keyPem: await readFile(key, "utf8"),
    });
    expect(made.stdout).toContain("Made the TLS interception CA");
    expect(made.stdout).toContain(`certificate  ${cert}`);
    expect(made.stdout).toContain(`subject      ${ca.certificate.subject}`);
    expect(made.stdout).toMatch(
      new RegExp(`not after    ${ca.notAfter.toISOString()} \\(365[23] days\\)`),
    );
    expect(made.stdout).toContain(`SPKI SHA-256 ${ca.spkiSha256}`);
    expect(made.stdout).not.toContain("PRIVATE KEY");
    expect((await stat(key)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, "keys"))).mode & 0o777).toBe(0o700);

    const again = await caTool(["create"], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("The TLS interception CA is there already, and usable");
    expect(again.stdout).toContain(`SPKI SHA-256 ${ca.spkiSha256}`);
  });

  it("takes --cert and --key over the settings, and refuses one file without the other", async () => {
    const cert = join(dir, "flags", "ca.pem");
    const key = join(dir, "flags", "ca-key.pem");
    expect((await caTool(["create", "--cert", cert, "--key", key])).code).toBe(0);
    const certPem = await readFile(cert, "utf8");
    await unlink(key);
    const refused = await caTool(["create", "--cert", cert, "--key", key]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `ca: ${key} is missing beside the TLS interception CA's other file (${cert}); restore it, ` +
        "or remove the other to make a new CA (clients that trusted the old one must then trust " +
        "the new)\n",
    );
    // Never replaced.
    expect(await readFile(cert, "utf8")).toBe(certPem);
  });

  it("exits 2 on a wrong command line", async () => {
    expect((await caTool(["create", "--cert", join(dir, "x.pem")])).code).toBe(2);
    expect((await caTool(["create", "--nope"])).code).toBe(2);
    const none = await caTool([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^ca: usage: npm run ca:create/);
  });
});
