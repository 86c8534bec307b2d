/**
 * The TLS interception CA: made once per install, loaded by every gateway, and the host
 * certificates it signs. Runs unchanged on Deno (the gateway) and Node (`npm start`, the api):
 * web crypto and `@peculiar/x509` only, never a file. Whoever reads the files names them
 * (`source`), so an error says which path is at fault.
 *
 * Every host's certificate is signed over ONE leaf key pair made when the CA is loaded (seed 000,
 * "TLS interception"): an RSA key takes about 50 ms to make, up to 160, on the event loop, which
 * stalled every connection at each new host; a signature over a key made once costs far less.
 * Clients check a host's certificate against the CA, never its key, so one key serves every host.
 *
 * ECDSA P-256 is the default for the CA and the leaf key: every client of the last decade takes
 * it, its signatures are a fraction of RSA 2048's cost (the `tls-ca` bench states both), its
 * handshakes are smaller and cheaper, and making a key is instant. RSA 2048 is there for a client
 * that takes nothing else (DESIGN.md: "ECDSA P-256 unless a client needs RSA").
 */
// @peculiar/x509 builds on tsyringe, which needs a Reflect metadata polyfill loaded before it:
// this import comes first, and no other module imports @peculiar/x509 but through this one.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { MitmCaError } from "../errors.ts";
import { normaliseHost } from "../net/host.ts";
import { parseIPv4, parseIPv6 } from "../net/ip.ts";
import { concatParts } from "../proxy-protocol/bytes.ts";
import {
  type Bytes,
  children,
  ecdsaSignatureDer,
  readElement,
  Tag,
  time,
  tlv,
  unsignedInteger,
  utf8,
} from "./der.ts";

/** The key pairs the CA and its leaf key may be made of. */
export const KEY_KINDS = ["ecdsa-p256", "rsa-2048"] as const;
export type KeyKind = (typeof KEY_KINDS)[number];

/** A CA made at first start lasts this long: an install should not meet its expiry. */
export const CA_VALIDITY_YEARS = 10;
/**
 * The longest a host certificate may be valid, backdating included: Apple's clients (and the
 * CA/Browser Forum for public CAs) refuse a server certificate valid longer than 398 days.
 */
export const LEAF_MAX_VALIDITY_DAYS = 397;
/** Host certificates start a day back, so a client whose clock is behind still accepts them. */
export const LEAF_BACKDATE_MS = 86_400_000;

const DAY_MS = 86_400_000;

/** The CA files as PEM text: the certificate, and its private key as PKCS#8. */
export interface CaPem {
  certPem: string;
  keyPem: string;
}

/** Where the files came from, for errors that name them. */
export interface CaSource {
  certPath?: string;
  keyPath?: string;
}

/** A host certificate as a TLS server takes it. */
export interface LeafCertificate {
  host: string;
  /** The host certificate alone. */
  certPem: string;
  certDer: Bytes;
  /**
   * The host certificate then the CA's: a client that does not trust the CA (Chromium with the
   * SPKI flag) still sees the CA's key in the chain it is served.
   */
  chainPem: string;
  /** The one leaf key's PKCS#8 PEM, the same for every host of this load. */
  keyPem: string;
  notBefore: Date;
  notAfter: Date;
}

// ---------------------------------------------------------------------------------------------
// Algorithms

interface KeyAlgorithms {
  generate: RsaHashedKeyGenParams | EcKeyGenParams;
  import: RsaHashedImportParams | EcKeyImportParams;
  sign: Algorithm | EcdsaParams;
  /** The signature's AlgorithmIdentifier, DER (ecdsa-with-SHA256, sha256WithRSAEncryption…). */
  signatureAlgorithm: Bytes;
}

const hex = (text: string): Bytes =>
  Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));

const ECDSA_WITH_SHA256 = hex("300a06082a8648ce3d040302");
const ECDSA_WITH_SHA384 = hex("300a06082a8648ce3d040303");
const SHA256_WITH_RSA = hex("300d06092a864886f70d01010b0500");

const ALGORITHMS: Readonly<Record<KeyKind, KeyAlgorithms>> = {
  "ecdsa-p256": {
    generate: { name: "ECDSA", namedCurve: "P-256" },
    import: { name: "ECDSA", namedCurve: "P-256" },
    sign: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
    signatureAlgorithm: ECDSA_WITH_SHA256,
  },
  "rsa-2048": {
    generate: {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    import: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    sign: { name: "RSASSA-PKCS1-v1_5" },
    signatureAlgorithm: SHA256_WITH_RSA,
  },
};

/**
 * How to import and sign with an operator's CA key, read from its certificate's public key:
 * ECDSA on P-256 or P-384, or RSA of at least 2048 bits.
 */
function caAlgorithms(cert: x509.X509Certificate): Omit<KeyAlgorithms, "generate"> {
  const algorithm = cert.publicKey.algorithm as Algorithm & {
    namedCurve?: string;
    modulusLength?: number;
  };
  if (algorithm.name === "ECDSA" && algorithm.namedCurve === "P-256") {
    return ALGORITHMS["ecdsa-p256"];
  }
  if (algorithm.name === "ECDSA" && algorithm.namedCurve === "P-384") {
    return {
      import: { name: "ECDSA", namedCurve: "P-384" },
      sign: { name: "ECDSA", hash: "SHA-384" } as EcdsaParams,
      signatureAlgorithm: ECDSA_WITH_SHA384,
    };
  }
  if (algorithm.name === "RSASSA-PKCS1-v1_5" && (algorithm.modulusLength ?? 0) >= 2048) {
    return ALGORITHMS["rsa-2048"];
  }
  const curve = algorithm.namedCurve ? ` ${algorithm.namedCurve}` : "";
  const size = algorithm.modulusLength ? ` ${algorithm.modulusLength}` : "";
  throw new MitmCaError(
    `the CA's key is ${algorithm.name}${curve}${size}; it must be ECDSA P-256 or P-384, or RSA ` +
      "of at least 2048 bits",
  );
}

// ---------------------------------------------------------------------------------------------
// Encodings

function bytesOf(buffer: ArrayBuffer): Bytes {
  return new Uint8Array(buffer);
}

function base64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

function pem(label: string, der: Uint8Array): string {
  const lines = base64(der).match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/** The DER of the first PEM block labelled `label`; undefined when there is none. */
function pemBlock(text: string, label: string): Bytes | undefined {
  const match = new RegExp(`-----BEGIN ${label}-----([^-]*)-----END ${label}-----`).exec(text);
  if (!match) return undefined;
  try {
    return Uint8Array.from(atob(match[1].replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/** A positive 128-bit serial number in hex: random, so two certificates never share one. */
function randomSerial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] & 0x7f) | 0x01;
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** SHA-256 of a SubjectPublicKeyInfo, in base64: Chromium's --ignore-certificate-errors-spki-list. */
export async function spkiSha256(spkiDer: Bytes): Promise<string> {
  return base64(bytesOf(await crypto.subtle.digest("SHA-256", spkiDer)));
}

// ---------------------------------------------------------------------------------------------
// Making a CA

export interface CreateCaOptions {
  keyKind?: KeyKind;
  /** The CA's common name; a random suffix tells two installs' CAs apart in a trust store. */
  commonName?: string;
  now?: Date;
}

/** A new CA, as its two PEM files: valid from a day back for CA_VALIDITY_YEARS. */
export async function createCa(options: CreateCaOptions = {}): Promise<CaPem> {
  const kind = options.keyKind ?? "ecdsa-p256";
  const now = options.now ?? new Date();
  const suffix = randomSerial().slice(0, 8);
  const commonName = options.commonName ?? `Octoprox MITM CA ${suffix}`;
  const algorithms = ALGORITHMS[kind];
  const keys = await crypto.subtle.generateKey(algorithms.generate, true, ["sign", "verify"]);
  const notAfter = new Date(now);
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + CA_VALIDITY_YEARS);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: [{ CN: [commonName] }, { O: ["Octoprox"] }],
    notBefore: new Date(now.getTime() - DAY_MS),
    notAfter,
    keys,
    signingAlgorithm: algorithms.sign,
    extensions: [
      // Signs host certificates only, never another CA.
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const keyDer = bytesOf(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { certPem: pem("CERTIFICATE", bytesOf(cert.rawData)), keyPem: pem("PRIVATE KEY", keyDer) };
}

// ---------------------------------------------------------------------------------------------
// A loaded CA

export interface LoadCaOptions {
  /** The one leaf key's kind (default ECDSA P-256, whatever the CA's own key is). */
  leafKeyKind?: KeyKind;
  source?: CaSource;
  now?: Date;
}

const CHALLENGE = new TextEncoder().encode("octoprox: does this key match its certificate?");

/** A CA certificate as read, without its key: what the api answers and a gateway checks. */
export interface CaCertificate {
  /** The certificate as PEM, re-encoded from its DER (whatever else the file held is left out). */
  certPem: string;
  certDer: Bytes;
  /** Base64 SHA-256 of its SubjectPublicKeyInfo (Chromium's SPKI list format). */
  spkiSha256: string;
  subject: string;
  notBefore: Date;
  notAfter: Date;
}

/** The parsed certificate beside what the api answers: loadCa signs with it. */
interface ReadCertificate extends CaCertificate {
  cert: x509.X509Certificate;
}

async function readCertificate(
  certPem: string,
  certPath: string | undefined,
  now: Date,
): Promise<ReadCertificate> {
  const certName = certPath ?? "the CA certificate";
  const certDer = pemBlock(certPem, "CERTIFICATE");
  if (!certDer) throw new MitmCaError(`${certName} holds no PEM CERTIFICATE block`);
  let cert: x509.X509Certificate;
  try {
    cert = new x509.X509Certificate(certDer);
  } catch (error) {
    throw new MitmCaError(`${certName} is not a readable certificate`, { cause: error });
  }
  const constraints = cert.getExtension(x509.BasicConstraintsExtension);
  if (!constraints?.ca) {
    throw new MitmCaError(`${certName} is not a CA certificate (basicConstraints CA:TRUE)`);
  }
  const usages = cert.getExtension(x509.KeyUsagesExtension);
  if (usages && (usages.usages & x509.KeyUsageFlags.keyCertSign) === 0) {
    throw new MitmCaError(`${certName} may not sign certificates (keyUsage lacks keyCertSign)`);
  }
  if (now < cert.notBefore || now > cert.notAfter) {
    throw new MitmCaError(
      `${certName} is valid from ${cert.notBefore.toISOString()} to ` +
        `${cert.notAfter.toISOString()}, not now`,
    );
  }
  return {
    cert,
    certPem: pem("CERTIFICATE", certDer),
    certDer,
    spkiSha256: await spkiSha256(bytesOf(cert.publicKey.rawData)),
    subject: cert.subject,
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
  };
}

/**
 * A CA certificate read from its PEM text and checked (a CA, in force), without its key. Throws
 * MitmCaError naming `certPath`.
 */
export async function readCaCertificate(
  certPem: string,
  options: { certPath?: string; now?: Date } = {},
): Promise<CaCertificate> {
  const { cert: _cert, ...read } = await readCertificate(
    certPem,
    options.certPath,
    options.now ?? new Date(),
  );
  return read;
}

/**
 * A CA read from its PEM text, checked (a CA certificate, in force, its key its certificate's),
 * with the one leaf key made. Throws MitmCaError naming the file at fault.
 */
export async function loadCa(files: CaPem, options: LoadCaOptions = {}): Promise<MitmCa> {
  const source = options.source ?? {};
  const certName = source.certPath ?? "the CA certificate";
  const keyName = source.keyPath ?? "the CA key";
  const read = await readCertificate(files.certPem, source.certPath, options.now ?? new Date());
  const cert = read.cert;
  const algorithms = (() => {
    try {
      return caAlgorithms(cert);
    } catch (error) {
      throw new MitmCaError(`${certName}: ${(error as Error).message}`);
    }
  })();

  const keyDer = pemBlock(files.keyPem, "PRIVATE KEY");
  if (!keyDer) {
    // Web crypto reads PKCS#8 only; openssl's older forms are one command away from it.
    throw new MitmCaError(
      `${keyName} holds no PEM PRIVATE KEY block (PKCS#8, unencrypted); convert an "RSA ` +
        `PRIVATE KEY", "EC PRIVATE KEY" or "ENCRYPTED PRIVATE KEY" with: openssl pkcs8 -topk8 ` +
        "-nocrypt -in <key> -out <key.pkcs8>",
    );
  }
  let signingKey: CryptoKey;
  try {
    // Not extractable: a loaded CA signs, and nothing ever exports its key again.
    signingKey = await crypto.subtle.importKey("pkcs8", keyDer, algorithms.import, false, [
      "sign",
    ]);
  } catch (error) {
    throw new MitmCaError(`${keyName} is not a key of the certificate's kind`, { cause: error });
  }
  const publicKey = await cert.publicKey.export(algorithms.import, ["verify"]);
  const signature = await crypto.subtle.sign(algorithms.sign, signingKey, CHALLENGE);
  if (!(await crypto.subtle.verify(algorithms.sign, publicKey, signature, CHALLENGE))) {
    throw new MitmCaError(`${keyName} is not the key of ${certName}`);
  }

  const leafKind = options.leafKeyKind ?? "ecdsa-p256";
  const leafAlgorithms = ALGORITHMS[leafKind];
  // Made here, once: never on a connection's path (see the header).
  const leafKeys = await crypto.subtle.generateKey(leafAlgorithms.generate, true, [
    "sign",
    "verify",
  ]);
  const leafSpki = bytesOf(await crypto.subtle.exportKey("spki", leafKeys.publicKey));
  const leafKeyPem = pem(
    "PRIVATE KEY",
    bytesOf(await crypto.subtle.exportKey("pkcs8", leafKeys.privateKey)),
  );
  // The CA's own key id where it states one, so the leaf's authority key id always matches it.
  const caKeyId = cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  const authorityKeyId = caKeyId
    ? new x509.AuthorityKeyIdentifierExtension(caKeyId)
    : await x509.AuthorityKeyIdentifierExtension.create(cert.publicKey);
  const leafExtensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(
      leafKind === "rsa-2048"
        ? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
        : x509.KeyUsageFlags.digitalSignature,
      true,
    ),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
    await x509.SubjectKeyIdentifierExtension.create(leafSpki),
    authorityKeyId,
  ];
  return new MitmCa({
    read,
    signingKey,
    sign: algorithms.sign,
    signatureAlgorithm: algorithms.signatureAlgorithm,
    ecdsa: algorithms.sign.name === "ECDSA",
    issuer: subjectDer(read.certDer),
    leafKind,
    leafSpki,
    leafKeyPem,
    leafExtensions: concatParts(leafExtensions.map((extension) => bytesOf(extension.rawData))),
  });
}

/**
 * The CA's subject exactly as its certificate encodes it: a host certificate's issuer must match
 * it byte for byte for some clients, so it is copied rather than encoded again.
 */
function subjectDer(certDer: Bytes): Bytes {
  const certificate = readElement(certDer, 0);
  const tbs = children(certDer, children(certDer, certificate)[0]);
  // version [0] is optional, then serial, signature, issuer, validity, subject.
  const subject = tbs[tbs[0].tag === Tag.context0 ? 5 : 4];
  return certDer.slice(subject.start, subject.end);
}

interface MitmCaParts {
  read: ReadCertificate;
  signingKey: CryptoKey;
  sign: Algorithm | EcdsaParams;
  signatureAlgorithm: Bytes;
  /** Web crypto's ECDSA signatures are r and s side by side; X.509 wants them in DER. */
  ecdsa: boolean;
  issuer: Bytes;
  leafKind: KeyKind;
  leafSpki: Bytes;
  leafKeyPem: string;
  /** The extensions every host certificate carries, DER, before its subjectAltName. */
  leafExtensions: Bytes;
}

/** version [0] EXPLICIT INTEGER 2: X.509 v3. */
const VERSION_3 = hex("a003020102");
const OID_COMMON_NAME = hex("0603550403");
const OID_ORGANIZATION = hex("060355040a");
const OID_SUBJECT_ALT_NAME = hex("0603551d11");

/** What a host's subjectAltName names, as a GeneralName: an IP address, or a DNS name. */
function altName(host: string): Bytes {
  const words = parseIPv6(host);
  if (words !== undefined) {
    const bytes = new Uint8Array(16);
    words.forEach((word, i) => {
      bytes[2 * i] = word >> 8;
      bytes[2 * i + 1] = word & 0xff;
    });
    return tlv(Tag.ipAddress, bytes);
  }
  // Plain dotted quads only (`127.1` or `010.0.0.1` are names to a TLS client, never addresses).
  const v4 = /^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$/.test(host) ? parseIPv4(host) : undefined;
  if (v4 !== undefined) {
    return tlv(
      Tag.ipAddress,
      new Uint8Array([v4 >>> 24, (v4 >> 16) & 0xff, (v4 >> 8) & 0xff, v4 & 0xff]),
    );
  }
  // Labels of letters, digits, `-` (not first) and `_` (some real hosts have one); no wildcard:
  // a certificate names the one host a client asked for.
  if (!/^[a-z0-9_]([a-z0-9_-]{0,62})?(\.[a-z0-9_]([a-z0-9_-]{0,62})?)*$/.test(host)) {
    throw new MitmCaError(`"${host.slice(0, 80)}" is neither a DNS name nor an IP address`);
  }
  if (host.length > 253) throw new MitmCaError("a DNS name is at most 253 characters");
  return tlv(Tag.dnsName, new TextEncoder().encode(host));
}

/** A Name of one attribute: CN=host, or O=Octoprox past a common name's 64 characters. */
function subjectName(host: string): Bytes {
  const attribute = host.length <= 64
    ? tlv(Tag.sequence, OID_COMMON_NAME, utf8(host))
    : tlv(Tag.sequence, OID_ORGANIZATION, utf8("Octoprox"));
  return tlv(Tag.sequence, tlv(Tag.set, attribute));
}

/** A CA loaded for signing: its certificate, its SPKI hash, and host certificates on demand. */
export class MitmCa {
  readonly #parts: MitmCaParts;

  constructor(parts: MitmCaParts) {
    this.#parts = parts;
  }

  /** The certificate alone, without the key: what the api answers and clients trust. */
  get certificate(): CaCertificate {
    const { cert: _cert, ...read } = this.#parts.read;
    return { ...read, certDer: read.certDer.slice() };
  }

  get certPem(): string {
    return this.#parts.read.certPem;
  }

  /** Base64 SHA-256 of the CA's SubjectPublicKeyInfo (Chromium's SPKI list format). */
  get spkiSha256(): string {
    return this.#parts.read.spkiSha256;
  }

  get notAfter(): Date {
    return this.#parts.read.notAfter;
  }

  /** The one leaf key's kind, and its PKCS#8 PEM (every host certificate's key). */
  get leafKeyKind(): KeyKind {
    return this.#parts.leafKind;
  }

  get leafKeyPem(): string {
    return this.#parts.leafKeyPem;
  }

  /**
   * A certificate for `host` (a DNS name, or an IPv4 or IPv6 address, brackets allowed) over the
   * one leaf key: from a day back, valid LEAF_MAX_VALIDITY_DAYS in all, never past the CA.
   */
  async mint(host: string, now: Date = new Date()): Promise<LeafCertificate> {
    const name = normaliseHost(host);
    const san = altName(name);
    const parts = this.#parts;
    const notBefore = new Date(now.getTime() - LEAF_BACKDATE_MS);
    const notAfter = new Date(
      Math.min(
        notBefore.getTime() + LEAF_MAX_VALIDITY_DAYS * DAY_MS,
        parts.read.notAfter.getTime(),
      ),
    );
    const subjectAltName = tlv(
      Tag.sequence,
      OID_SUBJECT_ALT_NAME,
      tlv(Tag.octetString, tlv(Tag.sequence, san)),
    );
    const serial = crypto.getRandomValues(new Uint8Array(16));
    serial[0] = (serial[0] & 0x7f) | 0x01;
    const tbs = tlv(
      Tag.sequence,
      VERSION_3,
      unsignedInteger(serial),
      parts.signatureAlgorithm,
      parts.issuer,
      tlv(Tag.sequence, time(notBefore), time(notAfter)),
      subjectName(name),
      parts.leafSpki,
      tlv(Tag.context3, tlv(Tag.sequence, parts.leafExtensions, subjectAltName)),
    );
    const raw = bytesOf(await crypto.subtle.sign(parts.sign, parts.signingKey, tbs));
    const signature = parts.ecdsa ? ecdsaSignatureDer(raw) : raw;
    const certDer = tlv(
      Tag.sequence,
      tbs,
      parts.signatureAlgorithm,
      tlv(Tag.bitString, new Uint8Array([0]), signature),
    );
    const certPem = pem("CERTIFICATE", certDer);
    return {
      host: name,
      certPem,
      certDer,
      chainPem: certPem + parts.read.certPem,
      keyPem: parts.leafKeyPem,
      notBefore,
      notAfter,
    };
  }
}
