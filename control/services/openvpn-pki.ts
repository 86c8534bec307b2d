/**
 * OpenVPN key material: the install's private CA, the server certificate it signs, each device's
 * client certificate, and the tls-crypt key. Every key is ECDSA P-256 made with web crypto (fast
 * to make, and what OpenVPN's `dh none` handshake wants); the CA is made as the interception
 * CA is (shared/tls/ca.ts), the leaves here with @peculiar/x509. The CA signs nothing but this install's server and devices (path length 0), a
 * server certificate carries serverAuth and a device's clientAuth, so neither can pose as the
 * other (`remote-cert-tls` on both sides). A device's certificate names it by id (its common
 * name) and has a random serial, which admission compares with the one on record: a rotated
 * certificate's predecessor is refused without a revocation list.
 *
 * The secret parts are sealed at rest (control/core/seal.ts) under a key of their own drawn
 * from the install's internal secret, each bound to its row and column.
 */
import "reflect-metadata";
import { randomBytes } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { createCa } from "../../shared/tls/ca.ts";
import { certificateSerial } from "../../shared/tunnel-status.ts";
import { openWith, sealKeyOf, sealWith } from "../core/seal.ts";

const LABEL = "octoprox/openvpn/keys/v1";
const YEAR_MS = 365 * 86_400_000;
/** Certificates start a day back, for clocks a little behind. */
const BACKDATE_MS = 86_400_000;
const VALIDITY_YEARS = 10;

const EC_KEY: EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const EC_SIGN: EcdsaParams = { name: "ECDSA", hash: "SHA-256" };

export interface OpenvpnIdentity {
  caCertificate: string;
  caKey: string;
  serverCertificate: string;
  serverKey: string;
  tlsCryptKey: string;
}

export interface IssuedCertificate {
  certificate: string;
  key: string;
  /** certificateSerial's form: what admission compares. */
  serial: string;
}

function randomSerial(): string {
  const bytes = randomBytes(16);
  // Positive, and never a leading zero byte DER would strip.
  bytes[0] = (bytes[0] & 0x7f) | 0x01;
  return bytes.toString("hex");
}

const keyPem = async (key: CryptoKey) =>
  x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");

function validity(now: Date) {
  return {
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + VALIDITY_YEARS * YEAR_MS),
  };
}

/** A leaf the CA signs: the server's (serverAuth) or a device's (clientAuth). */
async function issue(
  ca: { certificate: x509.X509Certificate; key: CryptoKey },
  commonName: string,
  usage: "server" | "client",
  now: Date,
): Promise<IssuedCertificate> {
  const keys = await crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"]);
  const serial = randomSerial();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject: [{ CN: [commonName] }, { O: ["Octoprox"] }],
    issuer: ca.certificate.subject,
    ...validity(now),
    signingKey: ca.key,
    publicKey: keys.publicKey,
    signingAlgorithm: EC_SIGN,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([
        usage === "server" ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(ca.certificate.publicKey),
    ],
  });
  return {
    certificate: cert.toString("pem"),
    key: await keyPem(keys.privateKey),
    serial: certificateSerial(serial)!,
  };
}

/**
 * A tls-crypt key as `openvpn --genkey tls-crypt` writes it: 256 random bytes in 16 lines of
 * hex between its markers.
 */
export function newTlsCryptKey(): string {
  const hex = randomBytes(256).toString("hex");
  const lines = [];
  for (let at = 0; at < hex.length; at += 32) lines.push(hex.slice(at, at + 32));
  return [
    "-----BEGIN OpenVPN Static key V1-----",
    ...lines,
    "-----END OpenVPN Static key V1-----",
    "",
  ].join("\n");
}

/**
 * A new CA (made as the interception CA is: P-256, ten years, signing leaves only), the server
 * certificate it signs, and a tls-crypt key.
 */
export async function newOpenvpnIdentity(now = new Date()): Promise<OpenvpnIdentity> {
  const suffix = randomSerial().slice(0, 8);
  const ca = await createCa({ commonName: `Octoprox OpenVPN CA ${suffix}`, now });
  const server = await issue(
    await loadSigner({ certificate: ca.certPem, key: ca.keyPem }),
    `Octoprox OpenVPN server ${suffix}`,
    "server",
    now,
  );
  return {
    caCertificate: ca.certPem,
    caKey: ca.keyPem,
    serverCertificate: server.certificate,
    serverKey: server.key,
    tlsCryptKey: newTlsCryptKey(),
  };
}

/** The CA given as PEM, ready to sign. */
async function loadSigner(ca: { certificate: string; key: string }) {
  return {
    certificate: new x509.X509Certificate(ca.certificate),
    key: await crypto.subtle.importKey(
      "pkcs8",
      x509.PemConverter.decodeFirst(ca.key),
      EC_KEY,
      false,
      ["sign"],
    ),
  };
}

/** A device's certificate, its common name the device's id, signed by the CA given as PEM. */
export async function issueDeviceCertificate(
  ca: { certificate: string; key: string },
  deviceId: string,
  now = new Date(),
): Promise<IssuedCertificate> {
  return await issue(await loadSigner(ca), deviceId, "client", now);
}

/** Where a sealed key lives: what it is bound to. */
export const OpenvpnKeyPlace = {
  ca: "openvpn_settings:1:ca_key",
  server: "openvpn_settings:1:server_key",
  tlsCrypt: "openvpn_settings:1:tls_crypt_key",
  device: (id: string) => `tunnel_devices:${id}:private_key`,
} as const;

const keyOf = (internalSecret: string) => sealKeyOf(internalSecret, LABEL);

export function sealOpenvpnKey(internalSecret: string, place: string, key: string): string {
  return sealWith(keyOf(internalSecret), place, key);
}

/** The key; throws (never naming it) when it does not open under this install's secret. */
export function openOpenvpnKey(internalSecret: string, place: string, sealed: string): string {
  return openWith(keyOf(internalSecret), place, sealed, "The sealed bytes of an OpenVPN key");
}
