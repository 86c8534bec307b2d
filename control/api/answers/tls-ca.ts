/**
 * GET /system/tls-ca as the API answers it (control/api/routes/ca-certificate.ts): the install's
 * TLS interception CA as the api reads it from OCTOPROX_TLS_MITM_CA_CERT_PATH, for the System
 * page (its end and days left) and the Connect page (its SPKI hash, where to download it).
 */
import * as v from "valibot";
import { count, timestamp } from "./common.ts";

/** A CA certificate: what clients trust, never anything of its key. */
export const TlsCaCertificateAnswer = v.strictObject({
  /** The file it was read from. */
  path: v.string(),
  /** Its distinguished name: `CN=Octoprox MITM CA 1a2b3c4d, O=Octoprox`. */
  subject: v.string(),
  not_before: timestamp,
  not_after: timestamp,
  /** Whole days to its end, rounded down. */
  days_left: count,
  /** Within `warning_days` of its end: the gateways warn in their log. */
  expires_soon: v.boolean(),
  /** Base64 SHA-256 of its public key (Chromium's --ignore-certificate-errors-spki-list). */
  spki_sha256: v.string(),
});
export type TlsCaCertificate = v.InferOutput<typeof TlsCaCertificateAnswer>;

/** After a rotation: the CA clients are moving from, and the overlap's end. */
export const TlsCaRotationAnswer = v.strictObject({
  /** When the overlap ends (OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL). */
  overlap_until: timestamp,
  /** Until then the download holds both CAs and gateways that start sign with the previous. */
  in_overlap: v.boolean(),
  /** The previous CA; null when its file cannot serve (`error`) or once the overlap ended. */
  previous: v.nullable(TlsCaCertificateAnswer),
  /** Why the previous CA's file cannot serve during the overlap. */
  error: v.nullable(v.string()),
});
export type TlsCaRotation = v.InferOutput<typeof TlsCaRotationAnswer>;

export const TlsCaStatusAnswer = v.strictObject({
  /** Whether the api was given the CA's certificate (OCTOPROX_TLS_MITM_CA_CERT_PATH). */
  configured: v.boolean(),
  /** Days before its end from which a CA is warned of (the gateways' log, this page). */
  warning_days: count,
  /** The CA clients trust; null when none is configured or its file cannot serve (`error`). */
  current: v.nullable(TlsCaCertificateAnswer),
  /** Why the configured file cannot serve (unreadable, not a CA, out of its validity). */
  error: v.nullable(v.string()),
  /** After a rotation (OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH set); null otherwise. */
  rotation: v.nullable(TlsCaRotationAnswer),
  /**
   * What a gateway that starts now signs with: the previous CA while the overlap lasts, the
   * current one otherwise; null without a CA.
   */
  signing: v.nullable(v.picklist(["current", "previous"])),
  /**
   * What Chromium's --ignore-certificate-errors-spki-list takes: the current CA's hash, and the
   * previous one's after it while the overlap lasts, comma-separated. Null without a usable CA.
   */
  spki_list: v.nullable(v.string()),
  /** Where to download it (signed in): PEM, DER, and the SPKI hash as text. */
  download: v.strictObject({ pem: v.string(), der: v.string(), spki: v.string() }),
});
export type TlsCaStatus = v.InferOutput<typeof TlsCaStatusAnswer>;
