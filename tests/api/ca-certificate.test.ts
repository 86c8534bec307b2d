/**
 * `GET /api/v1/projects/ca-certificate` over real stores: the CA's certificate as PEM (what
 * openssl reads as the file's certificate), DER and its SPKI hash (Chromium's SPKI list format,
 * also in a header of every form), for any signed-in role and no one else; a bad format is a 422
 * naming it; without a CA it is a 404 saying so, not "Project not found"; a file that cannot
 * serve is a 503 naming it; a project's own routes still answer beside it.
 *
 * `GET /api/v1/system/tls-ca` (any signed-in role) says what the CA is: its subject, end, days
 * left (marked within 30 days of its end) and SPKI hash, where to download it; a file that
 * cannot serve is said in `error` (200, so the System page shows it); no CA is `configured`
 * false.
 *
 * After a rotation, while the overlap lasts, the PEM download is a bundle of the current and the
 * previous CA (what openssl reads as two certificates), DER the current alone, the SPKI answer
 * and header both hashes; the status route says the overlap, the previous CA and that gateways
 * sign with it; once the overlap ended, the current alone again, the previous file not read.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createCa, loadCa, type MitmCa } from "../../shared/tls/ca.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

const run = promisify(execFile);
const PATH = "/api/v1/projects/ca-certificate";
const STATUS = "/api/v1/system/tls-ca";
const DAY_MS = 86_400_000;

let dir: string;
let certPath: string;
let ca: MitmCa;
let h: ApiHarness;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-ca-api-"));
  const files = await createCa();
  ca = await loadCa(files);
  certPath = join(dir, "ca.pem");
  // What an operator's file may hold besides the certificate: the api answers the block alone.
  await writeFile(certPath, `Octoprox MITM CA\n${files.certPem}`);
  h = await startHarness({ env: { OCTOPROX_TLS_MITM_CA_CERT_PATH: certPath } });
});

afterAll(async () => {
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("with a CA", () => {
  test("answers the PEM by default, with its SPKI hash in a header", async () => {
    const answer = await h.request("GET", PATH, { token: h.tokens.viewer });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/x-pem-file");
    expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(answer.text).toBe(ca.certPem);
    expect(answer.headers.get("x-octoprox-ca-spki-sha256")).toBe(ca.spkiSha256);
    // openssl reads it as the CA it is.
    const pem = join(dir, "answered.pem");
    await writeFile(pem, answer.text);
    const { stdout } = await run("openssl", ["x509", "-noout", "-subject", "-in", pem]);
    expect(stdout).toMatch(/CN = Octoprox MITM CA [0-9a-f]{8}/);
  });

  test("answers DER with format=der", async () => {
    const response = await h.app.request(`${PATH}?format=der`, {
      headers: { authorization: `Bearer ${h.tokens.viewer}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/pkix-cert");
    expect(response.headers.get("x-octoprox-ca-spki-sha256")).toBe(ca.spkiSha256);
    const der = new Uint8Array(await response.arrayBuffer());
    expect(Buffer.from(der).equals(Buffer.from(ca.certificate.certDer))).toBe(true);
    const path = join(dir, "answered.der");
    await writeFile(path, der);
    const { stdout } = await run("openssl", [
      "x509",
      "-inform",
      "der",
      "-noout",
      "-subject",
      "-in",
      path,
    ]);
    expect(stdout).toMatch(/CN = Octoprox MITM CA/);
  });

  test("answers the SPKI hash alone with format=spki, as Chromium's flag takes it", async () => {
    const answer = await h.request("GET", `${PATH}?format=spki`, { token: h.tokens.editor });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe(`${ca.spkiSha256}\n`);
    expect(answer.text).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
  });

  test("a format it does not know is a 422 naming it", async () => {
    const answer = await h.request("GET", `${PATH}?format=p12`, { token: h.tokens.admin });
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0].field).toBe("query.format");
    expect(answer.body.detail[0].message).toBe("must be one of pem, der, spki");
  });

  test("asks for a signed-in user", async () => {
    const answer = await h.request("GET", PATH, { token: "" });
    expect(answer.status).toBe(401);
  });

  test("a project's routes still answer beside it", async () => {
    const created = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Beside the CA", username: "besideca" },
    });
    expect(created.status, created.text).toBe(201);
    const read = await h.request("GET", `/api/v1/projects/${created.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(read.status).toBe(200);
    const missing = await h.request("GET", "/api/v1/projects/not-a-project", {
      token: h.tokens.viewer,
    });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe("Project not found");
  });

  test("a file that cannot serve is a 503 naming it; one put right answers at once", async () => {
    const path = join(dir, "replaced.pem");
    const other = await startHarness({ env: { OCTOPROX_TLS_MITM_CA_CERT_PATH: path } });
    try {
      const gone = await other.request("GET", PATH, { token: other.tokens.viewer });
      expect(gone.status).toBe(503);
      expect(gone.body.error).toContain(`${path} cannot be read`);

      // A host certificate is not a CA.
      await writeFile(path, (await ca.mint("leaf.example")).certPem);
      const leaf = await other.request("GET", PATH, { token: other.tokens.viewer });
      expect(leaf.status).toBe(503);
      expect(leaf.body.error).toBe(
        `The TLS interception CA cannot be used: ${path} is not a CA certificate ` +
          "(basicConstraints CA:TRUE)",
      );

      // The file is read on each request: the right one answers with nothing restarted.
      await writeFile(path, ca.certPem);
      const fixed = await other.request("GET", PATH, { token: other.tokens.viewer });
      expect(fixed.status).toBe(200);
      expect(fixed.text).toBe(ca.certPem);
    } finally {
      await other.close();
    }
  });
});

describe("without a CA", () => {
  test("answers 404 saying the install has none, not that a project is missing", async () => {
    const bare = await startHarness();
    try {
      const answer = await bare.request("GET", PATH, { token: bare.tokens.viewer });
      expect(answer.status).toBe(404);
      expect(answer.body.error).toBe(
        "This install has no TLS interception CA (OCTOPROX_TLS_MITM_CA_CERT_PATH is unset)",
      );
    } finally {
      await bare.close();
    }
  });
});

describe("GET /api/v1/system/tls-ca", () => {
  test("says what the CA is, for any signed-in role", async () => {
    const answer = await h.request("GET", STATUS, { token: h.tokens.viewer });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers.get("cache-control")).toBe("no-store");
    const daysLeft = Math.floor((ca.notAfter.getTime() - Date.now()) / DAY_MS);
    expect(answer.body).toEqual({
      configured: true,
      warning_days: 30,
      current: {
        path: certPath,
        subject: ca.certificate.subject,
        not_before: ca.certificate.notBefore.toISOString(),
        not_after: ca.notAfter.toISOString(),
        days_left: daysLeft,
        expires_soon: false,
        spki_sha256: ca.spkiSha256,
      },
      error: null,
      rotation: null,
      signing: "current",
      spki_list: ca.spkiSha256,
      download: {
        pem: PATH,
        der: `${PATH}?format=der`,
        spki: `${PATH}?format=spki`,
      },
    });
    expect(answer.body.current.subject).toMatch(/^CN=Octoprox MITM CA [0-9a-f]{8}, O=Octoprox$/);
    expect((await h.request("GET", STATUS, { token: "" })).status).toBe(401);
  });

  test("marks a CA within 30 days of its end", async () => {
    // Made ten years less twenty days ago: twenty days left.
    const soon = await createCa({ now: new Date(Date.now() - (3652 - 20) * DAY_MS) });
    const path = join(dir, "soon.pem");
    await writeFile(path, soon.certPem);
    const other = await startHarness({ env: { OCTOPROX_TLS_MITM_CA_CERT_PATH: path } });
    try {
      const answer = await other.request("GET", STATUS, { token: other.tokens.viewer });
      expect(answer.status).toBe(200);
      expect(answer.body.current.expires_soon).toBe(true);
      expect(answer.body.current.days_left).toBeGreaterThanOrEqual(18);
      expect(answer.body.current.days_left).toBeLessThan(30);
    } finally {
      await other.close();
    }
  });

  test("says why a file cannot serve, and that an install without a CA has none", async () => {
    const path = join(dir, "status-missing.pem");
    const broken = await startHarness({ env: { OCTOPROX_TLS_MITM_CA_CERT_PATH: path } });
    const bare = await startHarness();
    try {
      const missing = await broken.request("GET", STATUS, { token: broken.tokens.viewer });
      expect(missing.status).toBe(200);
      expect(missing.body.configured).toBe(true);
      expect(missing.body.current).toBeNull();
      expect(missing.body.error).toMatch(
        new RegExp(`^The TLS interception CA cannot be used: ${path} cannot be read: `),
      );
      const none = await bare.request("GET", STATUS, { token: bare.tokens.viewer });
      expect(none.status).toBe(200);
      expect(none.body).toMatchObject({ configured: false, current: null, error: null });
    } finally {
      await broken.close();
      await bare.close();
    }
  });
});

describe("after a rotation", () => {
  let previous: MitmCa;
  let previousPath: string;

  beforeAll(async () => {
    previous = await loadCa(await createCa());
    previousPath = join(dir, "previous.pem");
    await writeFile(previousPath, previous.certPem);
  });

  const rotated = (until: Date, path = previousPath) =>
    startHarness({
      env: {
        OCTOPROX_TLS_MITM_CA_CERT_PATH: certPath,
        OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: path,
        OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: until.toISOString(),
      },
    });

  test("hands out both while the overlap lasts: PEM bundled, DER the current, SPKI both", async () => {
    const until = new Date(Date.now() + 7 * DAY_MS);
    const other = await rotated(until);
    try {
      const pem = await other.request("GET", PATH, { token: other.tokens.viewer });
      expect(pem.status, pem.text).toBe(200);
      expect(pem.text).toBe(ca.certPem + previous.certPem);
      const both = `${ca.spkiSha256},${previous.spkiSha256}`;
      expect(pem.headers.get("x-octoprox-ca-spki-sha256")).toBe(both);
      // openssl reads the bundle as the two CAs, the current first.
      const bundle = join(dir, "bundle.pem");
      await writeFile(bundle, pem.text);
      const { stdout } = await run("sh", [
        "-c",
        'openssl crl2pkcs7 -nocrl -certfile "$0" | openssl pkcs7 -print_certs -noout',
        bundle,
      ]);
      const subjects = [...stdout.matchAll(/^subject=CN = ([^,]*)/gm)].map((m) => m[1]);
      expect(subjects).toEqual([ca, previous].map((one) => one.certificate.subject.slice(3, 28)));

      const der = await other.app.request(`${PATH}?format=der`, {
        headers: { authorization: `Bearer ${other.tokens.viewer}` },
      });
      expect(Buffer.from(await der.arrayBuffer()).equals(Buffer.from(ca.certificate.certDer)))
        .toBe(true);
      const spki = await other.request("GET", `${PATH}?format=spki`, {
        token: other.tokens.viewer,
      });
      expect(spki.text).toBe(`${both}\n`);

      const status = await other.request("GET", STATUS, { token: other.tokens.viewer });
      expect(status.body).toMatchObject({
        current: { spki_sha256: ca.spkiSha256 },
        rotation: {
          overlap_until: until.toISOString(),
          in_overlap: true,
          previous: {
            path: previousPath,
            subject: previous.certificate.subject,
            spki_sha256: previous.spkiSha256,
          },
          error: null,
        },
        signing: "previous",
        spki_list: both,
      });
    } finally {
      await other.close();
    }
  });

  test("once the overlap ended, the current alone, the previous file not read", async () => {
    const until = new Date(Date.now() - 1000);
    // Gone after the overlap, as an operator may remove it: nothing asks for it any more.
    const other = await rotated(until, join(dir, "removed-previous.pem"));
    try {
      const pem = await other.request("GET", PATH, { token: other.tokens.viewer });
      expect(pem.status).toBe(200);
      expect(pem.text).toBe(ca.certPem);
      expect(pem.headers.get("x-octoprox-ca-spki-sha256")).toBe(ca.spkiSha256);
      const status = await other.request("GET", STATUS, { token: other.tokens.viewer });
      expect(status.body).toMatchObject({
        rotation: {
          overlap_until: until.toISOString(),
          in_overlap: false,
          previous: null,
          error: null,
        },
        signing: "current",
        spki_list: ca.spkiSha256,
      });
    } finally {
      await other.close();
    }
  });

  test("a previous file that cannot serve during the overlap is a 503 naming it", async () => {
    const missing = join(dir, "missing-previous.pem");
    const other = await rotated(new Date(Date.now() + DAY_MS), missing);
    try {
      const pem = await other.request("GET", PATH, { token: other.tokens.viewer });
      expect(pem.status).toBe(503);
      expect(pem.body.error).toContain(`${missing} cannot be read`);
      const status = await other.request("GET", STATUS, { token: other.tokens.viewer });
      expect(status.status).toBe(200);
      expect(status.body.current.spki_sha256).toBe(ca.spkiSha256);
      expect(status.body.rotation.error).toMatch(
        new RegExp(`^The previous TLS interception CA cannot be used: ${missing} cannot be read`),
      );
    } finally {
      await other.close();
    }
  });
});
