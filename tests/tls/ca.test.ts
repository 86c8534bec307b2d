/**
 * The TLS interception CA (shared/tls/ca.ts), judged by openssl: a CA made here (10 years,
 * ECDSA P-256, CA:TRUE) and one an operator made with openssl both load; host certificates they
 * sign pass `openssl verify` for a TLS server of that name or address, carry the right
 * subjectAltName, start a day back and last 397 days at most (never past the CA); every host of
 * one load shares the one leaf key; the SPKI hash is openssl's; files that cannot serve are
 * refused naming the file.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MitmCaError } from "../../shared/errors.ts";
import {
  type CaPem,
  createCa,
  LEAF_BACKDATE_MS,
  LEAF_MAX_VALIDITY_DAYS,
  loadCa,
  type MitmCa,
  readCaCertificate,
} from "../../shared/tls/ca.ts";

const run = promisify(execFile);
const DAY_MS = 86_400_000;

let dir: string;
let serial = 0;

/** Writes `text` to a new file of the test's folder and answers its path. */
async function file(name: string, text: string): Promise<string> {
  const path = join(dir, `${++serial}-${name}`);
  await writeFile(path, text);
  return path;
}

async function openssl(...args: string[]): Promise<string> {
  const { stdout } = await run("openssl", args);
  return stdout;
}

/** `openssl verify` of `leafPem` against `caPem` as a TLS server for `target`. */
async function verify(caPem: string, leafPem: string, target: string[]): Promise<string> {
  return await openssl(
    "verify",
    "-CAfile",
    await file("ca.pem", caPem),
    "-purpose",
    "sslserver",
    ...target,
    await file("leaf.pem", leafPem),
  );
}

let ca: MitmCa;
let caPem: string;
/** The files `ca` was loaded from, for a second load. */
let caFiles: CaPem;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-mitm-ca-"));
  caFiles = await createCa();
  caPem = caFiles.certPem;
  ca = await loadCa(caFiles);
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a CA made by createCa", () => {
  test("is a CA for 10 years on ECDSA P-256, its key in PKCS#8", async () => {
    const files = await createCa({ now: new Date("2026-01-02T00:00:00Z") });
    const text = await openssl(
      "x509",
      "-noout",
      "-text",
      "-in",
      await file("ca.pem", files.certPem),
    );
    expect(text).toContain("ASN1 OID: prime256v1");
    expect(text).toMatch(/CA:TRUE, pathlen:0/);
    expect(text).toContain("Certificate Sign, CRL Sign");
    expect(text).toMatch(/Subject: CN = Octoprox MITM CA [0-9a-f]{8}, O = Octoprox/);
    expect(text).toContain("Not Before: Jan  1 00:00:00 2026 GMT");
    expect(text).toContain("Not After : Jan  2 00:00:00 2036 GMT");
    expect(files.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    // openssl reads the key, and it is the certificate's.
    const fromKey = await openssl("pkey", "-pubout", "-in", await file("key.pem", files.keyPem));
    const fromCert = await openssl(
      "x509",
      "-noout",
      "-pubkey",
      "-in",
      await file("c.pem", files.certPem),
    );
    expect(fromKey).toBe(fromCert);
  });

  test("its SPKI SHA-256 is openssl's, in base64", async () => {
    const spki = join(dir, "spki.der");
    const pubkey = await file(
      "pub.pem",
      await openssl("x509", "-noout", "-pubkey", "-in", await file("ca.pem", caPem)),
    );
    await openssl("pkey", "-pubin", "-in", pubkey, "-outform", "der", "-out", spki);
    const digest = await openssl("dgst", "-sha256", "-binary", "-out", join(dir, "spki.sha"), spki);
    expect(digest).toBe("");
    const expected = (await readFile(join(dir, "spki.sha"))).toString("base64");
    expect(ca.spkiSha256).toBe(expected);
    expect((await readCaCertificate(caPem)).spkiSha256).toBe(expected);
  });
});

describe("host certificates", () => {
  test("a name's passes openssl verify as a TLS server for that name, and no other", async () => {
    const leaf = await ca.mint("Shop.Example.COM.");
    expect(leaf.host).toBe("shop.example.com");
    const ok = await verify(caPem, leaf.certPem, ["-verify_hostname", "shop.example.com"]);
    expect(ok).toMatch(/: OK$/m);
    await expect(verify(caPem, leaf.certPem, ["-verify_hostname", "other.example.com"]))
      .rejects.toThrow(/hostname mismatch/);
    const text = await openssl("x509", "-noout", "-text", "-in", await file("l.pem", leaf.certPem));
    expect(text).toContain("DNS:shop.example.com");
    expect(text).toContain("Subject: CN = shop.example.com");
    expect(text).toContain("TLS Web Server Authentication");
    expect(text).toContain("CA:FALSE");
  });

  test("a name past a common name's 64 characters is named by its subjectAltName alone", async () => {
    const long = `${"a".repeat(40)}.${"b".repeat(40)}.example`;
    const leaf = await ca.mint(long);
    expect(await verify(caPem, leaf.certPem, ["-verify_hostname", long])).toMatch(/: OK$/m);
    const text = await openssl("x509", "-noout", "-text", "-in", await file("n.pem", leaf.certPem));
    expect(text).toContain(`DNS:${long}`);
    expect(text).toContain("Subject: O = Octoprox");
  });

  test("an IPv4 and an IPv6 target's carry IP address SANs that openssl verifies", async () => {
    const v4 = await ca.mint("203.0.113.7");
    expect(await verify(caPem, v4.certPem, ["-verify_ip", "203.0.113.7"])).toMatch(/: OK$/m);
    const v6 = await ca.mint("[2001:db8::1]");
    expect(v6.host).toBe("2001:db8::1");
    expect(await verify(caPem, v6.certPem, ["-verify_ip", "2001:db8::1"])).toMatch(/: OK$/m);
    const text = await openssl(
      "x509",
      "-noout",
      "-ext",
      "subjectAltName",
      "-in",
      await file("v6.pem", v6.certPem),
    );
    expect(text).toContain("IP Address:2001:DB8:0:0:0:0:0:1");
    const v4Text = await openssl(
      "x509",
      "-noout",
      "-ext",
      "subjectAltName",
      "-in",
      await file("v4.pem", v4.certPem),
    );
    expect(v4Text).toContain("IP Address:203.0.113.7");
    expect(v4Text).not.toContain("DNS:");
  });

  test("start a day back and last 397 days; never past the CA", async () => {
    const now = new Date("2027-03-04T05:06:07Z");
    const leaf = await ca.mint("dates.example", now);
    expect(leaf.notBefore.getTime()).toBe(now.getTime() - LEAF_BACKDATE_MS);
    expect(leaf.notAfter.getTime() - leaf.notBefore.getTime()).toBe(
      LEAF_MAX_VALIDITY_DAYS * DAY_MS,
    );
    const dates = await openssl(
      "x509",
      "-noout",
      "-dates",
      "-in",
      await file("d.pem", leaf.certPem),
    );
    expect(dates).toContain("notBefore=Mar  3 05:06:07 2027 GMT");
    expect(dates).toContain("notAfter=Apr  3 05:06:07 2028 GMT");

    // A CA with 100 days left: its host certificates end with it.
    const made = new Date(Date.now() - 10 * 365 * DAY_MS + 100 * DAY_MS);
    const old = await loadCa(await createCa({ now: made }));
    const capped = await old.mint("late.example");
    expect(capped.notAfter.getTime()).toBe(old.notAfter.getTime());
    expect(await verify(old.certPem, capped.certPem, ["-verify_hostname", "late.example"]))
      .toMatch(/: OK$/m);
  });

  test("every host of one load shares the one leaf key; a new load makes another", async () => {
    const a = await ca.mint("a.example");
    const b = await ca.mint("b.example");
    expect(a.keyPem).toBe(b.keyPem);
    const pub = async (pem: string) =>
      await openssl("x509", "-noout", "-pubkey", "-in", await file("p.pem", pem));
    expect(await pub(a.certPem)).toBe(await pub(b.certPem));
    expect(await openssl("pkey", "-pubout", "-in", await file("k.pem", a.keyPem))).toBe(
      await pub(a.certPem),
    );
    const again = await loadCa(caFiles);
    expect((await again.mint("a.example")).keyPem).not.toBe(a.keyPem);
    // The chain is the host's certificate, then the CA's.
    expect(a.chainPem).toBe(a.certPem + ca.certPem);
  });

  test("an RSA 2048 leaf key, when a client needs one, verifies as well", async () => {
    const rsa = await loadCa(caFiles, { leafKeyKind: "rsa-2048" });
    const leaf = await rsa.mint("rsa.example");
    const text = await openssl("x509", "-noout", "-text", "-in", await file("r.pem", leaf.certPem));
    expect(text).toContain("Public-Key: (2048 bit)");
    expect(text).toContain("Key Encipherment");
    expect(await verify(rsa.certPem, leaf.certPem, ["-verify_hostname", "rsa.example"]))
      .toMatch(/: OK$/m);
  });

  test("what is neither a name nor an address is refused before anything is signed", async () => {
    const bad = ["", "exa mple.com", "a/b", "-x.example", "*.example.com", `${"a".repeat(64)}.x`];
    for (const host of bad) {
      await expect(ca.mint(host), host).rejects.toBeInstanceOf(MitmCaError);
    }
  });
});

describe("an operator's own CA", () => {
  test("an openssl-made RSA CA loads, and its host certificates verify", async () => {
    const key = join(dir, "op-key.pem");
    const cert = join(dir, "op-cert.pem");
    await openssl(
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "30",
      "-subj",
      "/CN=Operator CA",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    );
    const own = await loadCa(
      { certPem: await readFile(cert, "utf8"), keyPem: await readFile(key, "utf8") },
      { source: { certPath: cert, keyPath: key } },
    );
    const leaf = await own.mint("op.example");
    expect(await verify(own.certPem, leaf.certPem, ["-verify_hostname", "op.example"]))
      .toMatch(/: OK$/m);
    expect(leaf.notAfter.getTime()).toBeLessThanOrEqual(own.notAfter.getTime());
  });

  test("files that cannot serve are refused, naming the file", async () => {
    const other = await createCa();
    await expect(
      loadCa({ certPem: caPem, keyPem: other.keyPem }, { source: { keyPath: "/ca/key.pem" } }),
    ).rejects.toThrow("/ca/key.pem is not the key of the CA certificate");

    const leaf = await ca.mint("leaf.example");
    await expect(
      loadCa({ certPem: leaf.certPem, keyPem: leaf.keyPem }, { source: { certPath: "/ca/c.pem" } }),
    ).rejects.toThrow("/ca/c.pem is not a CA certificate");

    await expect(loadCa({ certPem: "nothing", keyPem: "" }, { source: { certPath: "/x.pem" } }))
      .rejects.toThrow("/x.pem holds no PEM CERTIFICATE block");

    // openssl's traditional EC key form: refused with the command that converts it.
    const sec1 = join(dir, "sec1.pem");
    await openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", sec1);
    await expect(loadCa({ certPem: caPem, keyPem: await readFile(sec1, "utf8") }))
      .rejects.toThrow(/PKCS#8.*openssl pkcs8 -topk8/);

    const expired = await createCa({ now: new Date(Date.now() - 11 * 365 * DAY_MS) });
    await expect(loadCa(expired, { source: { certPath: "/old.pem" } }))
      .rejects.toThrow(/\/old\.pem is valid from .* not now/);
    await expect(readCaCertificate(expired.certPem)).rejects.toBeInstanceOf(MitmCaError);
  });
});
