/**
 * The TLS interception CA's certificate, for clients to trust. It lives under /projects because
 * the projects that intercept are what it serves; it is mounted before `/projects/:id`, which
 * would otherwise read `ca-certificate` as a project id (404 "Project not found"). Beside it,
 * GET /system/tls-ca says what the CA is (its end, days left, SPKI hash) for the System and
 * Connect pages.
 *
 * The file is read on each request (a few hundred bytes): a CA replaced on disk is answered at
 * once, with nothing to restart. The api reads the certificate alone, never the key.
 *
 * After a rotation (OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH and _OVERLAP_UNTIL), while the overlap
 * lasts the PEM download is a bundle of both certificates, current first, and the SPKI answer
 * (and header) lists both hashes, as Chromium's flag takes a list: gateways sign with the previous
 * CA until then and with the current one after, and a client given both trusts either. DER holds
 * one certificate: it answers the current one, which such a client adds beside the one it has.
 */
import { readFile } from "node:fs/promises";
import { UserRole } from "../../../shared/roles.ts";
import { errorText, MitmCaError, NotFoundError } from "../../../shared/errors.ts";
import { type CaCertificate, readCaCertificate } from "../../../shared/tls/ca.ts";
import { daysLeft, EXPIRY_WARNING_DAYS } from "../../../shared/tls/ca-expiry.ts";
import { CaCertificateQuery } from "../../model/projects.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  type TlsCaCertificate,
  type TlsCaRotation,
  type TlsCaStatus,
  TlsCaStatusAnswer,
} from "../answers/tls-ca.ts";

export const CA_CERTIFICATE_PATH = "/api/v1/projects/ca-certificate";
export const TLS_CA_STATUS_PATH = "/api/v1/system/tls-ca";

/**
 * Every form carries the SPKI hash in this header, so a script that downloads the certificate
 * has the value for Chromium's --ignore-certificate-errors-spki-list as well.
 */
export const SPKI_HEADER = "X-Octoprox-Ca-Spki-Sha256";

/** The CA certificate at `path`, checked; MitmCaError naming the file when it cannot serve. */
async function certificateAt(path: string, now = new Date()): Promise<CaCertificate> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new MitmCaError(`${path} cannot be read: ${errorText(error)}`, { cause: error });
  }
  return await readCaCertificate(text, { certPath: path, now });
}

/** The previous CA's certificate while a rotation's overlap lasts; undefined otherwise. */
async function previousInOverlap(
  settings: ApiDeps["settings"],
  now: Date,
): Promise<CaCertificate | undefined> {
  const path = settings.tlsMitmCaPreviousCertPath;
  const until = settings.tlsMitmCaOverlapUntilMs;
  if (path === undefined || until === undefined || now.getTime() >= until) return undefined;
  return await certificateAt(path, now);
}

/** What the download answers: the current CA, and the previous one while the overlap lasts. */
async function caCertificates(
  deps: ApiDeps,
): Promise<{ current: CaCertificate; previous: CaCertificate | undefined }> {
  const path = deps.settings.tlsMitmCaCertPath;
  if (path === undefined) {
    throw new NotFoundError(
      "CA certificate",
      "This install has no TLS interception CA (OCTOPROX_TLS_MITM_CA_CERT_PATH is unset)",
    );
  }
  const now = new Date();
  return {
    current: await certificateAt(path, now),
    previous: await previousInOverlap(deps.settings, now),
  };
}

function describeCertificate(path: string, ca: CaCertificate, now: Date): TlsCaCertificate {
  const left = daysLeft(ca.notAfter, now);
  return {
    path,
    subject: ca.subject,
    not_before: ca.notBefore.toISOString(),
    not_after: ca.notAfter.toISOString(),
    days_left: left,
    expires_soon: left < EXPIRY_WARNING_DAYS,
    spki_sha256: ca.spkiSha256,
  };
}

/** What the System and Connect pages show of the CA: read from its file now. */
export async function tlsCaStatus(
  settings: ApiDeps["settings"],
  now: Date = new Date(),
): Promise<TlsCaStatus> {
  const path = settings.tlsMitmCaCertPath;
  const status: TlsCaStatus = {
    configured: path !== undefined,
    warning_days: EXPIRY_WARNING_DAYS,
    current: null,
    error: null,
    rotation: null,
    signing: null,
    spki_list: null,
    download: {
      pem: CA_CERTIFICATE_PATH,
      der: `${CA_CERTIFICATE_PATH}?format=der`,
      spki: `${CA_CERTIFICATE_PATH}?format=spki`,
    },
  };
  if (path === undefined) return status;
  try {
    status.current = describeCertificate(path, await certificateAt(path, now), now);
  } catch (error) {
    if (!(error instanceof MitmCaError)) throw error;
    status.error = `The TLS interception CA cannot be used: ${error.message}`;
  }
  status.rotation = await rotationOf(settings, now);
  status.signing = status.rotation?.in_overlap ? "previous" : "current";
  if (status.current !== null) {
    status.spki_list = [
      status.current,
      status.rotation?.in_overlap ? status.rotation.previous : null,
    ]
      .filter((ca) => ca !== null).map((ca) => ca.spki_sha256).join(",");
  }
  return status;
}

async function rotationOf(
  settings: ApiDeps["settings"],
  now: Date,
): Promise<TlsCaRotation | null> {
  const path = settings.tlsMitmCaPreviousCertPath;
  const until = settings.tlsMitmCaOverlapUntilMs;
  if (path === undefined || until === undefined) return null;
  const rotation: TlsCaRotation = {
    overlap_until: new Date(until).toISOString(),
    in_overlap: now.getTime() < until,
    previous: null,
    error: null,
  };
  // Once the overlap ended the previous file is not needed, and may be gone.
  if (!rotation.in_overlap) return rotation;
  try {
    rotation.previous = describeCertificate(path, await certificateAt(path, now), now);
  } catch (error) {
    if (!(error instanceof MitmCaError)) throw error;
    rotation.error = `The previous TLS interception CA cannot be used: ${error.message}`;
  }
  return rotation;
}

export function caCertificateRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: CA_CERTIFICATE_PATH,
      tag: "projects",
      summary: "The TLS interception CA's certificate",
      description: "What clients trust so that a project's TLS interception is accepted: " +
        "`format=pem` (the default, `application/x-pem-file`), `der` " +
        "(`application/pkix-cert`), or `spki`: the base64 SHA-256 of its public key, one " +
        "line of text, as Chromium's `--ignore-certificate-errors-spki-list` takes it. Every " +
        `form carries that value in the \`${SPKI_HEADER}\` header. After a rotation, while ` +
        "its overlap lasts, PEM is a bundle of the current and the previous CA and `spki` " +
        "(and the header) lists both hashes, comma-separated; DER answers the current CA " +
        "alone. 404 when the install has no CA; 503 when a file cannot be read or is not a CA " +
        "in force.",
      access: UserRole.viewer,
      query: CaCertificateQuery,
      responses: {
        200: "The certificate in the form asked for",
        404: "The install has no TLS interception CA",
        503: "The CA's file cannot be read, or is not a CA in force",
      },
      async handler({ c, query }) {
        const { current: ca, previous } = await caCertificates(deps);
        const spki = previous === undefined
          ? ca.spkiSha256
          : `${ca.spkiSha256},${previous.spkiSha256}`;
        c.header(SPKI_HEADER, spki);
        // Public, but it changes when the operator replaces it: never kept by a cache.
        c.header("Cache-Control", "no-store");
        switch (query.format) {
          case "der":
            c.header("Content-Type", "application/pkix-cert");
            c.header("Content-Disposition", 'attachment; filename="octoprox-ca.cer"');
            return c.body(ca.certDer);
          case "spki":
            return c.text(`${spki}\n`);
          case "pem":
            c.header("Content-Type", "application/x-pem-file");
            c.header("Content-Disposition", 'attachment; filename="octoprox-ca.pem"');
            return c.body(ca.certPem + (previous?.certPem ?? ""));
        }
      },
    }),
    defineRoute({
      method: "get",
      path: TLS_CA_STATUS_PATH,
      tag: "system",
      summary: "The TLS interception CA: its subject, end, days left and SPKI hash",
      description: "Read from `OCTOPROX_TLS_MITM_CA_CERT_PATH` on each request, as the " +
        "download is. `configured` is false when the install has no CA; a file that cannot " +
        "serve (unreadable, not a CA, out of its validity) answers 200 with `current` null and " +
        "`error` saying why, so the System page can show it. `expires_soon` is true within " +
        "`warning_days` (30) of its end, when the gateways warn in their log. After a " +
        "rotation, `rotation` says when its overlap ends and, while it lasts, the previous CA " +
        "(which gateways that start then sign with: `signing`); `spki_list` is what " +
        "Chromium's flag takes, both hashes during the overlap. Any signed-in " +
        "role: the certificate is what clients are handed.",
      access: UserRole.viewer,
      responses: {
        200: answer("The CA as the api reads it now", TlsCaStatusAnswer),
      },
      async handler({ c }) {
        c.header("Cache-Control", "no-store");
        return c.json(await tlsCaStatus(deps.settings));
      },
    }),
  ];
}
