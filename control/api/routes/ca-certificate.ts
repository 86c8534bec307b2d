/**
 * The TLS interception CA's certificate, for clients to trust. It lives under /projects because
 * the projects that intercept are what it serves; it is mounted before `/projects/:id`, which
 * would otherwise read `ca-certificate` as a project id (404 "Project not found").
 *
 * The file is read on each request (a few hundred bytes): a CA replaced on disk is answered at
 * once, with nothing to restart. The api reads the certificate alone, never the key.
 */
import { readFile } from "node:fs/promises";
import { UserRole } from "../../../shared/roles.ts";
import { errorText, MitmCaError, NotFoundError } from "../../../shared/errors.ts";
import { type CaCertificate, readCaCertificate } from "../../../shared/tls/ca.ts";
import { CaCertificateQuery } from "../../model/projects.ts";
import type { ApiDeps } from "../deps.ts";
import { defineRoute, type Route } from "../registry.ts";

export const CA_CERTIFICATE_PATH = "/api/v1/projects/ca-certificate";

/**
 * Every form carries the SPKI hash in this header, so a script that downloads the certificate
 * has the value for Chromium's --ignore-certificate-errors-spki-list as well.
 */
export const SPKI_HEADER = "X-Octoprox-Ca-Spki-Sha256";

async function caCertificate(deps: ApiDeps): Promise<CaCertificate> {
  const path = deps.settings.tlsMitmCaCertPath;
  if (path === undefined) {
    throw new NotFoundError(
      "CA certificate",
      "This install has no TLS interception CA (OCTOPROX_TLS_MITM_CA_CERT_PATH is unset)",
    );
  }
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new MitmCaError(`${path} cannot be read: ${errorText(error)}`, { cause: error });
  }
  return await readCaCertificate(text, { certPath: path });
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
        `form carries that value in the \`${SPKI_HEADER}\` header. 404 when the install has no ` +
        "CA; 503 when its file cannot be read or is not a CA in force.",
      access: UserRole.viewer,
      query: CaCertificateQuery,
      responses: {
        200: "The certificate in the form asked for",
        404: "The install has no TLS interception CA",
        503: "The CA's file cannot be read, or is not a CA in force",
      },
      async handler({ c, query }) {
        const ca = await caCertificate(deps);
        c.header(SPKI_HEADER, ca.spkiSha256);
        // Public, but it changes when the operator replaces it: never kept by a cache.
        c.header("Cache-Control", "no-store");
        switch (query.format) {
          case "der":
            c.header("Content-Type", "application/pkix-cert");
            c.header("Content-Disposition", 'attachment; filename="octoprox-ca.cer"');
            return c.body(ca.certDer);
          case "spki":
            return c.text(`${ca.spkiSha256}\n`);
          case "pem":
            c.header("Content-Type", "application/x-pem-file");
            c.header("Content-Disposition", 'attachment; filename="octoprox-ca.pem"');
            return c.body(ca.certPem);
        }
      },
    }),
  ];
}
