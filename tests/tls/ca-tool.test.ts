/**
 * The CA tool (`npm run ca:create`, scripts/ca.ts) as compose's `tls-ca` service and an operator
 * run it: it makes the CA where the settings (or --cert and --key) say, the key 0600 in a private
 * folder, and prints the subject, the end and the SPKI hash; run again it keeps and checks the
 * same CA; a certificate without its key is refused (exit 1, naming both), never replaced; a
 * wrong command line exits 2.
 *
 * `npm run ca:rotate -- --overlap-days N` moves the pair aside as the previous CA (its key still
 * 0600), makes a new one in its place, records the overlap's end beside the certificate and
 * prints the settings that carry it; it ends the overlap at the previous CA's own end when that
 * comes first; it refuses a second rotation while the first one's overlap runs, and a missing CA.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCa, loadCa } from "../../shared/tls/ca.ts";
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

describe("npm run ca:rotate", () => {
  const DAY_MS = 86_400_000;

  it("moves the pair aside, makes a new one, and records the overlap's end", async () => {
    const cert = join(dir, "rotate", "mitm-ca.pem");
    const key = join(dir, "rotate", "mitm-ca-key.pem");
    const env = { OCTOPROX_TLS_MITM_CA_CERT_PATH: cert, OCTOPROX_TLS_MITM_CA_KEY_PATH: key };
    expect((await caTool(["create"], env)).code).toBe(0);
    const before = { certPem: await readFile(cert, "utf8"), keyPem: await readFile(key, "utf8") };
    const started = Date.now();
    const rotated = await caTool(["rotate", "--overlap-days", "14"], env);
    expect(rotated.stderr).toBe("");
    expect(rotated.code).toBe(0);
    const previousCert = join(dir, "rotate", "mitm-ca.previous.pem");
    const previousKey = join(dir, "rotate", "mitm-ca-key.previous.pem");
    // The old pair, moved whole; a new pair in its place.
    expect(await readFile(previousCert, "utf8")).toBe(before.certPem);
    expect(await readFile(previousKey, "utf8")).toBe(before.keyPem);
    expect((await stat(previousKey)).mode & 0o777).toBe(0o600);
    expect((await stat(key)).mode & 0o777).toBe(0o600);
    const now = await loadCa({
      certPem: await readFile(cert, "utf8"),
      keyPem: await readFile(key, "utf8"),
    });
    const old = await loadCa(before);
    expect(now.spkiSha256).not.toBe(old.spkiSha256);
    const record = JSON.parse(await readFile(join(dir, "rotate", "rotation.json"), "utf8"));
    expect(record).toMatchObject({
      previous_cert_path: previousCert,
      previous_key_path: previousKey,
    });
    const until = Date.parse(record.overlap_until);
    expect(until).toBeGreaterThanOrEqual(Math.floor(started / 1000) * 1000 + 14 * DAY_MS);
    expect(until).toBeLessThan(Date.now() + 14 * DAY_MS);
    expect(until % 1000).toBe(0);
    // What the operator gives the api and the gateways, and both hashes.
    for (
      const line of [
        `OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH=${previousCert}`,
        `OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH=${previousKey}`,
        `OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL=${record.overlap_until}`,
        `SPKI SHA-256 ${now.spkiSha256}`,
        `SPKI SHA-256 ${old.spkiSha256}`,
      ]
    ) expect(rotated.stdout).toContain(line);
    expect(rotated.stdout).not.toContain("PRIVATE KEY");

    // A second rotation while the overlap runs would drop the CA clients may still trust.
    const again = await caTool(["rotate", "--overlap-days", "1"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      `an earlier rotation's overlap runs until ${record.overlap_until}`,
    );
    expect(await readFile(previousCert, "utf8")).toBe(before.certPem);
  });

  it("ends the overlap with the previous CA when that comes first", async () => {
    const cert = join(dir, "short", "mitm-ca.pem");
    const key = join(dir, "short", "mitm-ca-key.pem");
    // A CA with twenty days left.
    const soon = await createCa({ now: new Date(Date.now() - (3652 - 20) * DAY_MS) });
    expect((await caTool(["create", "--cert", cert, "--key", key])).code).toBe(0);
    await writeFile(cert, soon.certPem);
    await writeFile(key, soon.keyPem);
    const rotated = await caTool(["rotate", "--cert", cert, "--key", key, "--overlap-days", "60"]);
    expect(rotated.code).toBe(0);
    const record = JSON.parse(await readFile(join(dir, "short", "rotation.json"), "utf8"));
    expect(record.overlap_until).toBe((await loadCa(soon)).notAfter.toISOString());
    expect(rotated.stdout).toContain("(the previous CA's own end, sooner than the days asked)");
  });

  it("refuses a wrong overlap, and a CA that is not there", async () => {
    for (const days of [[], ["--overlap-days", "0"], ["--overlap-days", "2.5"]]) {
      const wrong = await caTool(["rotate", ...days]);
      expect(wrong.code).toBe(2);
      expect(wrong.stderr).toBe("ca: --overlap-days takes a whole number of days from 1 to 365\n");
    }
    const missing = join(dir, "none", "mitm-ca.pem");
    const none = await caTool([
      "rotate",
      "--cert",
      missing,
      "--key",
      join(dir, "none", "mitm-ca-key.pem"),
      "--overlap-days",
      "7",
    ]);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(`ca: ${missing} (the TLS interception CA) does not exist\n`);
  });
});
