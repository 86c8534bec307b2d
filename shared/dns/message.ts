/**
 * The DNS wire format (RFC 1035) as far as the tunnel plane's resolver needs it: reading a
 * query's header and its one question, and writing an answer to it. Queries are read
 * defensively: a name that points past the message, loops through compression pointers or
 * breaks the length limits is malformed, never a crash.
 *
 * Web-standard only (Uint8Array, DataView), so Deno and Node both run it.
 */

/** Record types the resolver tells apart; every other type gets an empty answer. */
export const DnsType = {
  a: 1,
  aaaa: 28,
} as const;

export const DnsClass = { in: 1 } as const;

/** Response codes the resolver sends (RFC 1035 §4.1.1). */
export const DnsRcode = {
  noError: 0,
  formErr: 1,
  servFail: 2,
  nxDomain: 3,
  notImp: 4,
  refused: 5,
} as const;
export type DnsRcode = (typeof DnsRcode)[keyof typeof DnsRcode];

const HEADER_BYTES = 12;
/** RFC 1035 §2.3.4: a name of at most 255 bytes on the wire. */
const MAX_NAME_BYTES = 255;
/** Compression pointers followed at most, so a pointer loop ends. */
const MAX_POINTERS = 16;

export interface DnsHeader {
  id: number;
  /** The flags word as sent: QR, opcode, AA, TC, RD, RA, Z, RCODE. */
  flags: number;
  questions: number;
}

export interface DnsQuestion {
  /** Lower case, without the root's trailing dot; "" for the root itself. */
  name: string;
  type: number;
  class: number;
}

export type DnsQuery =
  | {
    ok: true;
    header: DnsHeader;
    question: DnsQuestion; /** The question's bytes as sent. */
    questionBytes: Uint8Array;
  }
  | {
    ok: false; /** Undefined when not even the header could be read: nothing to answer. */
    header?: DnsHeader;
    reason: string;
  };

export function isResponse(flags: number): boolean {
  return (flags & 0x8000) !== 0;
}

export function opcodeOf(flags: number): number {
  return (flags >> 11) & 0xf;
}

/** Reads a query's header and its first question. */
export function readQuery(bytes: Uint8Array): DnsQuery {
  if (bytes.length < HEADER_BYTES) return { ok: false, reason: "shorter than a header" };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const header: DnsHeader = {
    id: view.getUint16(0),
    flags: view.getUint16(2),
    questions: view.getUint16(4),
  };
  if (header.questions !== 1) return { ok: false, header, reason: "not one question" };
  const name = readName(bytes, HEADER_BYTES);
  if (typeof name === "string") return { ok: false, header, reason: name };
  const end = name.end;
  if (end + 4 > bytes.length) return { ok: false, header, reason: "question cut short" };
  const question: DnsQuestion = {
    name: name.labels.join("."),
    type: view.getUint16(end),
    class: view.getUint16(end + 2),
  };
  return { ok: true, header, question, questionBytes: bytes.subarray(HEADER_BYTES, end + 4) };
}

/** A name's labels, lower case, and where the name ends in place; or why it is malformed. */
function readName(bytes: Uint8Array, start: number): { labels: string[]; end: number } | string {
  const labels: string[] = [];
  let at = start;
  let end: number | undefined;
  let wire = 1;
  let pointers = 0;
  for (;;) {
    if (at >= bytes.length) return "name runs past the message";
    const length = bytes[at];
    if (length === 0) {
      end ??= at + 1;
      return { labels, end };
    }
    if ((length & 0xc0) === 0xc0) {
      if (at + 1 >= bytes.length) return "pointer cut short";
      if (++pointers > MAX_POINTERS) return "too many compression pointers";
      end ??= at + 2;
      at = ((length & 0x3f) << 8) | bytes[at + 1];
      continue;
    }
    // 0x40 and 0x80 are the reserved label types; what is left is a length of at most 63.
    if ((length & 0xc0) !== 0) return "reserved label type";
    wire += length + 1;
    if (wire > MAX_NAME_BYTES) return "name longer than 255 bytes";
    if (at + 1 + length > bytes.length) return "label runs past the message";
    let label = "";
    for (let i = at + 1; i <= at + length; i++) {
      const byte = bytes[i];
      label += String.fromCharCode(byte >= 0x41 && byte <= 0x5a ? byte + 0x20 : byte);
    }
    labels.push(label);
    at += 1 + length;
  }
}

/**
 * Whether a name can be a CONNECT target: letters, digits, hyphens and underscores in labels
 * of at least one character, and at least one label.
 */
export function isHostName(name: string): boolean {
  return /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$/.test(name);
}

export interface DnsAnswer {
  id: number;
  /** The query's flags, of which the answer keeps the opcode and RD. */
  queryFlags: number;
  rcode: DnsRcode;
  /** The question as the query sent it, echoed; absent for an answer to a malformed query. */
  questionBytes?: Uint8Array;
  /** One A record for the question's name: the address as a 32-bit number. */
  a?: { address: number; ttlSeconds: number };
}

/** Writes an answer: QR and RA set, AA set (the resolver is the authority for what it made up). */
export function writeAnswer(answer: DnsAnswer): Uint8Array {
  const question = answer.questionBytes;
  const record = answer.a !== undefined && question !== undefined;
  const size = HEADER_BYTES + (question?.length ?? 0) + (record ? 16 : 0);
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  const keep = answer.queryFlags & 0x7900; // opcode and RD
  view.setUint16(0, answer.id);
  view.setUint16(2, 0x8000 | keep | 0x0400 | 0x0080 | answer.rcode);
  view.setUint16(4, question === undefined ? 0 : 1);
  view.setUint16(6, record ? 1 : 0);
  if (question !== undefined) bytes.set(question, HEADER_BYTES);
  if (record && answer.a !== undefined) {
    let at = HEADER_BYTES + question.length;
    view.setUint16(at, 0xc000 | HEADER_BYTES); // the question's name
    view.setUint16(at + 2, DnsType.a);
    view.setUint16(at + 4, DnsClass.in);
    view.setUint32(at + 6, answer.a.ttlSeconds);
    view.setUint16(at + 10, 4);
    view.setUint32(at + 12, answer.a.address >>> 0);
    at += 16;
  }
  return bytes;
}
