/**
 * The client's TLS fingerprints, from its ClientHello (client-hello.ts), as the Inspector shows
 * them: JA3 (Salesforce's: version, ciphers, extensions, groups and point formats in the order
 * sent, GREASE left out, MD5) and JA4 (FoxIO's TCP form `t13d1516h2_<ciphers>_<extensions>`:
 * sorted ciphers and extensions, SNI and ALPN left out of the second, signature algorithms in
 * order, each part SHA-256 cut to 12 hex digits). Computed once per tunnel.
 */
import { createHash } from "node:crypto";
import { type ClientHello, isGrease } from "./client-hello.ts";

export interface TlsFingerprints {
  ja3: string;
  /** The JA3 string before hashing (what it is made of, for reading). */
  ja3Text: string;
  ja4: string;
}

const EXT_SERVER_NAME = 0;
const EXT_ALPN = 16;

function real(values: readonly number[]): number[] {
  return values.filter((value) => !isGrease(value));
}

function hex4(value: number): string {
  return value.toString(16).padStart(4, "0");
}

function sha256First12(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 12);
}

function twoDigits(count: number): string {
  return String(Math.min(count, 99)).padStart(2, "0");
}

const VERSIONS: Readonly<Record<number, string>> = {
  0x0304: "13",
  0x0303: "12",
  0x0302: "11",
  0x0301: "10",
  0x0300: "s3",
};

/** ALPN's part: the first and last character of the first protocol offered (`00`: none). */
function alpnPart(alpn: readonly string[]): string {
  const first = alpn[0];
  if (first === undefined || first === "") return "00";
  const ends = `${first[0]}${first[first.length - 1]}`;
  return /^[A-Za-z0-9]{2}$/.test(ends) ? ends : "99";
}

export function fingerprints(hello: ClientHello): TlsFingerprints {
  const ciphers = real(hello.ciphers);
  const extensions = real(hello.extensions);
  const ja3Text = [
    String(hello.version),
    ciphers.join("-"),
    extensions.join("-"),
    real(hello.groups).join("-"),
    hello.pointFormats.join("-"),
  ].join(",");
  const ja3 = createHash("md5").update(ja3Text).digest("hex");

  const a = `t${VERSIONS[hello.maxVersion] ?? "00"}${hello.serverName !== undefined ? "d" : "i"}${
    twoDigits(ciphers.length)
  }${twoDigits(extensions.length)}${alpnPart(hello.alpn)}`;
  const b = ciphers.length === 0
    ? "000000000000"
    : sha256First12(ciphers.map(hex4).sort().join(","));
  const counted = extensions.filter((type) => type !== EXT_SERVER_NAME && type !== EXT_ALPN);
  const signatures = real(hello.signatureAlgorithms).map(hex4).join(",");
  const cText = counted.map(hex4).sort().join(",") + (signatures === "" ? "" : `_${signatures}`);
  const c = counted.length === 0 ? "000000000000" : sha256First12(cText);
  return { ja3, ja3Text, ja4: `${a}_${b}_${c}` };
}
