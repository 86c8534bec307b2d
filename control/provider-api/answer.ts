/**
 * A provider API's fetch answer read as proxies, and the fetch's classification (issue 16; seed
 * 001, sections 5 and 8.1). Pure: the fetch job calls the provider, hands the body here with the
 * connector's parser settings and the time, then classifies the outcome against the keys the
 * pool already holds (by this or another upstream).
 *
 * Formats:
 * - `text`: one proxy a line, `host:port`, `host:port:user:pass`, `user:pass@host:port` or
 *   `scheme://user:pass@host:port`; blank lines and `#` comments skipped.
 * - `json`: the entries a JMESPath `items` expression selects (the answer itself without one),
 *   each read with a JMESPath expression per field (a field not named is read at its own name);
 *   an entry that is a string is read as a text line.
 * - `csv`: RFC 4180, a header row whose columns are named by the field names (others ignored).
 *
 * Fields: `host`, `port`, `scheme`, `username`, `password`, `country`, and the expiry:
 * `expires_at` (epoch seconds, epoch milliseconds, or ISO 8601 with its zone), else `ttl_seconds`,
 * else the connector's default TTL. Addresses are read by the one proxy parser
 * (control/model/proxy-url.ts), so an answer and an upload agree on what a proxy is.
 *
 * Nothing here repeats the answer's text in a reason or an error: a provider's answer carries
 * credentials, and a stray line may hold a password where a host belongs.
 */
import { compile, type JSONValue, TreeInterpreter } from "@jmespath-community/jmespath";
import { normaliseCountry } from "../../shared/countries.ts";
import { type FieldIssue, ProviderAnswerError, VendorCallError } from "../../shared/errors.ts";
import { PROXY_SCHEMES, type ProxyScheme } from "../../shared/roles.ts";
import {
  type Parsed,
  parseHost,
  parseHostPort,
  parseProxyUrl,
  type ProxyAddress,
  proxyIdentity,
} from "../model/proxy-url.ts";

export const AnswerFormat = { text: "text", json: "json", csv: "csv" } as const;
export type AnswerFormat = (typeof AnswerFormat)[keyof typeof AnswerFormat];
export const ANSWER_FORMATS: readonly AnswerFormat[] = Object.values(AnswerFormat);

/** What an entry of a JSON or CSV answer may say: JSON field paths and CSV columns name these. */
export const ANSWER_FIELDS = [
  "host",
  "port",
  "scheme",
  "username",
  "password",
  "country",
  "expires_at",
  "ttl_seconds",
] as const;
export type AnswerField = (typeof ANSWER_FIELDS)[number];

/** As the egress guard's answer cap: an answer the guard lets through is not refused here. */
export const DEFAULT_MAX_ANSWER_BYTES = 10 * 1024 * 1024;
/** As a descriptor call's item cap (control/egress/http-call.ts). */
export const DEFAULT_MAX_ANSWER_ITEMS = 100_000;
/** Invalid entries described at most; the count covers them all. */
export const MAX_INVALID_SHOWN = 20;

/** How a connector reads its provider's answer. */
export interface AnswerSpec {
  format: AnswerFormat;
  /** JSON only: the JMESPath expression selecting the entries; the whole answer without one. */
  items?: string;
  /** JSON only: a JMESPath expression per field, read on each entry. */
  fields?: Readonly<Partial<Record<AnswerField, string>>>;
  /** The scheme of entries that name none. */
  defaultScheme: ProxyScheme;
  /** The lifetime of entries the answer gives no expiry; without it such an entry is invalid. */
  defaultTtlSeconds?: number;
  /** Taken off each expiry: new allocations stop this long before the provider ends a proxy. */
  safetyMarginMs: number;
  /** The largest answer read (default `DEFAULT_MAX_ANSWER_BYTES`); a larger one is an error. */
  maxBytes?: number;
  /** The most entries read (default `DEFAULT_MAX_ANSWER_ITEMS`); more is an error. */
  maxItems?: number;
}

/** A proxy of the answer, ready for the pool. */
export interface ProviderProxy extends ProxyAddress {
  /** Its uniqueness key (section 5): scheme, lower-cased host, port, username; no password. */
  key: string;
  /** ISO 3166-1 alpha-2, upper case; null when the answer gives none or no assigned code. */
  country: string | null;
  expiresAtMs: number;
  /** `expiresAtMs` less the safety margin: no new allocation from then on. */
  usableUntilMs: number;
}

export interface InvalidEntry {
  /** The entry's place, 1 first: its line in a text or CSV answer, its item in a JSON list. */
  position: number;
  /** What is wrong, in words of ours: never the entry's own text. */
  reason: string;
}

export interface AnswerCounts {
  /** Entries read: non-blank, non-comment lines; JSON items; CSV rows after the header. */
  entries: number;
  /** Entries that are proxies (the rest are `invalid`). */
  parsed: number;
  invalid: number;
  /** Proxies already past their usable time on arrival: dropped. */
  expired: number;
  /** Proxies whose key an earlier entry of the same answer had: dropped, the first kept. */
  repeated: number;
}

export interface ParsedAnswer {
  /** Live proxies, one per key, in the answer's order. */
  proxies: ProviderProxy[];
  counts: AnswerCounts;
  /** The first `MAX_INVALID_SHOWN` invalid entries. */
  invalid: InvalidEntry[];
}

// ---------------------------------------------------------------------------------------------
// The parser's settings.

type Expression = ReturnType<typeof compile>;

interface CompiledSpec {
  items: Expression | undefined;
  fields: readonly (readonly [AnswerField, Expression])[];
}

/** Expressions by text: a connector's few expressions are compiled once, not once an entry. */
const expressions = new Map<string, Expression>();

function compiled(expression: string): Expression {
  let node = expressions.get(expression);
  if (node === undefined) {
    node = compile(expression);
    // Expressions come from connectors, a bounded set; the bound is a guard, not a policy.
    if (expressions.size > 10_000) expressions.clear();
    expressions.set(expression, node);
  }
  return node;
}

function compileIssue(expression: string, field: string): FieldIssue | undefined {
  try {
    compiled(expression);
    return undefined;
  } catch (error) {
    const detail = error instanceof Error ? `: ${error.message}` : "";
    return { field, message: `not a JMESPath expression${detail}` };
  }
}

const positiveInteger = (value: unknown) =>
  typeof value === "number" && Number.isInteger(value) && value > 0;

/** What is wrong with a connector's parser settings (fields named from the spec's root). */
export function answerSpecIssues(spec: AnswerSpec): FieldIssue[] {
  const issues: FieldIssue[] = [];
  if (!(ANSWER_FORMATS as readonly string[]).includes(spec.format)) {
    issues.push({ field: "format", message: `must be one of ${ANSWER_FORMATS.join(", ")}` });
  }
  const json = spec.format === AnswerFormat.json;
  if (spec.items !== undefined) {
    if (!json) issues.push({ field: "items", message: "is read on JSON answers only" });
    else {
      const issue = compileIssue(spec.items, "items");
      if (issue) issues.push(issue);
    }
  }
  for (const [field, expression] of Object.entries(spec.fields ?? {})) {
    const where = `fields.${field}`;
    if (!json) {
      issues.push({ field: where, message: "JSON answers only: CSV columns are named by field" });
    } else if (!(ANSWER_FIELDS as readonly string[]).includes(field)) {
      issues.push({ field: where, message: `is not one of ${ANSWER_FIELDS.join(", ")}` });
    } else if (typeof expression !== "string") {
      issues.push({ field: where, message: "must be a JMESPath expression" });
    } else {
      const issue = compileIssue(expression, where);
      if (issue) issues.push(issue);
    }
  }
  if (!(PROXY_SCHEMES as readonly string[]).includes(spec.defaultScheme)) {
    issues.push({ field: "defaultScheme", message: `must be one of ${PROXY_SCHEMES.join(", ")}` });
  }
  const ttl = spec.defaultTtlSeconds;
  if (ttl !== undefined && !(typeof ttl === "number" && Number.isFinite(ttl) && ttl > 0)) {
    issues.push({ field: "defaultTtlSeconds", message: "must be a number of seconds above 0" });
  }
  const margin = spec.safetyMarginMs;
  if (!(typeof margin === "number" && Number.isFinite(margin) && margin >= 0)) {
    issues.push({ field: "safetyMarginMs", message: "must be milliseconds, 0 or more" });
  }
  if (spec.maxBytes !== undefined && !positiveInteger(spec.maxBytes)) {
    issues.push({ field: "maxBytes", message: "must be a whole number above 0" });
  }
  if (spec.maxItems !== undefined && !positiveInteger(spec.maxItems)) {
    issues.push({ field: "maxItems", message: "must be a whole number above 0" });
  }
  return issues;
}

/**
 * Specs checked and compiled once per object, as templates are (a fetch job reads every answer
 * of a connector with the one spec it built); a changed configuration is a new object.
 */
const compiledSpecs = new WeakMap<AnswerSpec, CompiledSpec>();

function compileSpec(spec: AnswerSpec): CompiledSpec {
  let found = compiledSpecs.get(spec);
  if (found === undefined) {
    const issues = answerSpecIssues(spec);
    if (issues.length > 0) {
      throw new ProviderAnswerError(
        "spec",
        `the connector's answer settings do not compile: ${
          issues.map((issue) => `${issue.field} ${issue.message}`).join("; ")
        }`,
      );
    }
    const json = spec.format === AnswerFormat.json;
    found = {
      items: json && spec.items !== undefined ? compiled(spec.items) : undefined,
      fields: json
        ? ANSWER_FIELDS.map((field) => [field, compiled(spec.fields?.[field] ?? field)] as const)
        : [],
    };
    compiledSpecs.set(spec, found);
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Entries.

function fail<T>(reason: string): Parsed<T> {
  return { ok: false, reason };
}

/**
 * The parser's reason without what it quotes: `parseProxyUrl` names the scheme a line wrote, and
 * in a provider's answer that text may be a password (a line cut in the wrong place).
 */
function ourReason(reason: string): string {
  return reason.replace(/ ?"[^"]*"/g, "");
}

const SCHEMES: ReadonlySet<string> = new Set(PROXY_SCHEMES);
const SCHEME_HINT = `use one of ${PROXY_SCHEMES.join(", ")}`;
const TEXT_FORMS = "expected host:port, host:port:user:pass, user:pass@host:port or " +
  "scheme://user:pass@host:port";

/**
 * An address from its parts as an answer gives them (credentials as they are, not
 * percent-encoded), read by the one parser: the host is checked first, so nothing in it can
 * move the URL's boundaries, and the credentials are encoded so the parser gives them back
 * exactly.
 */
function addressFromParts(
  scheme: string,
  host: string,
  port: string,
  username: string | undefined,
  password: string | undefined,
): Parsed<ProxyAddress> {
  if (!SCHEMES.has(scheme)) return fail(`unsupported scheme; ${SCHEME_HINT}`);
  // JSON and CSV answers write IPv6 hosts bare; the parser wants them in brackets.
  const checked = parseHost(host.includes(":") && !host.startsWith("[") ? `[${host}]` : host);
  if (!checked.ok) return checked;
  if (!/^\d{1,5}$/.test(port)) return fail("the port must be from 1 to 65535");
  const user = username ?? "";
  const pass = password ?? "";
  const userinfo = user === "" && pass === ""
    ? ""
    : `${encodeURIComponent(user)}:${encodeURIComponent(pass)}@`;
  const shownHost = checked.value.includes(":") ? `[${checked.value}]` : checked.value;
  return parseProxyUrl(`${scheme}://${userinfo}${shownHost}:${port}`);
}

/** A text line (trimmed, not blank) in any of the four forms. */
function textAddress(text: string, defaultScheme: ProxyScheme): Parsed<ProxyAddress> {
  if (text.includes("://")) return parseProxyUrl(text);
  // `user:pass@host:port` when a host and port follow the last @; else the @ is a password's
  // (`host:port:user:p@ss`).
  const at = text.lastIndexOf("@");
  if (at >= 0 && parseHostPort(text.slice(at + 1)).ok) {
    return parseProxyUrl(`${defaultScheme}://${text}`);
  }
  let host: string;
  let rest: string;
  if (text.startsWith("[")) {
    const end = text.indexOf("]");
    if (end < 0) return fail("the IPv6 address lacks its closing bracket");
    host = text.slice(0, end + 1);
    rest = text.slice(end + 1);
    if (!rest.startsWith(":")) return fail("the port is missing (host:port)");
    rest = rest.slice(1);
  } else {
    const colon = text.indexOf(":");
    if (colon < 0) return fail("the port is missing (host:port)");
    host = text.slice(0, colon);
    rest = text.slice(colon + 1);
  }
  const parts = rest.split(":");
  if (parts.length === 1) return addressFromParts(defaultScheme, host, parts[0], "", "");
  // The password is what follows the third colon, colons included: passwords carry them.
  if (parts.length >= 3) {
    return addressFromParts(defaultScheme, host, parts[0], parts[1], parts.slice(2).join(":"));
  }
  return fail(TEXT_FORMS);
}

/** Epoch milliseconds from 10^11 on: as seconds that is the year 5138, as milliseconds 1973. */
const EPOCH_MS_FROM = 1e11;
const NUMBER = /^\d+(\.\d+)?$/;
const ISO_8601 =
  /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(Z|[+-]\d{2}(?::?\d{2})?)$/i;

type Raw = string | number | undefined;

function present(value: Raw): value is string | number {
  return value !== undefined && value !== "";
}

/** An `expires_at` in epoch seconds, epoch milliseconds or ISO 8601, as epoch milliseconds. */
function expiresAt(value: string | number): number | undefined {
  const text = typeof value === "string" ? value.trim() : "";
  if (typeof value === "number" || NUMBER.test(text)) {
    const number = typeof value === "number" ? value : Number(text);
    if (!Number.isFinite(number) || number < 0) return undefined;
    return number >= EPOCH_MS_FROM ? number : number * 1000;
  }
  // A time without its zone is refused rather than guessed: the provider's zone is not ours.
  const match = ISO_8601.exec(text);
  if (match === null) return undefined;
  // Date.parse reads the standard's one form only: `T`, and a zone of Z or ±hh:mm.
  let zone = match[3].toUpperCase();
  if (zone !== "Z") {
    zone = zone.length === 3 ? `${zone}:00` : zone.replace(/^(.\d{2})(\d{2})$/, "$1:$2");
  }
  const ms = Date.parse(`${match[1]}T${match[2]}${zone}`);
  return Number.isNaN(ms) ? undefined : ms;
}

/** When the entry ends: its `expires_at`, else its `ttl_seconds`, else the default TTL. */
function expiryOf(
  expires: Raw,
  ttl: Raw,
  spec: AnswerSpec,
  nowMs: number,
): Parsed<number> {
  if (present(expires)) {
    const ms = expiresAt(expires);
    if (ms === undefined) {
      return fail(
        "expires_at is not epoch seconds, epoch milliseconds or an ISO 8601 time with its zone",
      );
    }
    return { ok: true, value: ms };
  }
  if (present(ttl)) {
    const seconds = typeof ttl === "number" ? ttl : NUMBER.test(ttl.trim()) ? Number(ttl) : NaN;
    if (!Number.isFinite(seconds) || seconds < 0) {
      return fail("ttl_seconds is not a number of seconds");
    }
    return { ok: true, value: nowMs + seconds * 1000 };
  }
  if (spec.defaultTtlSeconds !== undefined) {
    return { ok: true, value: nowMs + spec.defaultTtlSeconds * 1000 };
  }
  return fail("no expiry: the entry has no expires_at or ttl_seconds and no default TTL is set");
}

/** The answer read so far: live proxies, one per key, and the counts. */
class Reader {
  readonly proxies: ProviderProxy[] = [];
  readonly invalid: InvalidEntry[] = [];
  readonly counts: AnswerCounts = { entries: 0, parsed: 0, invalid: 0, expired: 0, repeated: 0 };
  readonly #keys = new Set<string>();
  readonly #spec: AnswerSpec;
  readonly #nowMs: number;
  readonly #maxItems: number;

  constructor(spec: AnswerSpec, nowMs: number) {
    this.#spec = spec;
    this.#nowMs = nowMs;
    this.#maxItems = spec.maxItems ?? DEFAULT_MAX_ANSWER_ITEMS;
  }

  /** Counts an entry; past the item cap the whole answer is refused, never cut short. */
  entry(): void {
    if (++this.counts.entries > this.#maxItems) {
      throw new ProviderAnswerError(
        "too_many_items",
        `the answer holds more than ${this.#maxItems} entries, the most a fetch reads`,
      );
    }
  }

  reject(position: number, reason: string): void {
    this.counts.invalid++;
    if (this.invalid.length < MAX_INVALID_SHOWN) {
      this.invalid.push({ position, reason: ourReason(reason) });
    }
  }

  admit(
    position: number,
    address: Parsed<ProxyAddress>,
    country: string | null,
    expiry: Parsed<number>,
  ): void {
    if (!address.ok) return this.reject(position, address.reason);
    if (!expiry.ok) return this.reject(position, expiry.reason);
    this.counts.parsed++;
    const usableUntilMs = expiry.value - this.#spec.safetyMarginMs;
    // Expiry before uniqueness: an entry already over is no candidate, so it holds no key.
    if (usableUntilMs <= this.#nowMs) {
      this.counts.expired++;
      return;
    }
    const key = proxyIdentity(address.value);
    if (this.#keys.has(key)) {
      this.counts.repeated++;
      return;
    }
    this.#keys.add(key);
    this.proxies.push({
      ...address.value,
      key,
      country,
      expiresAtMs: expiry.value,
      usableUntilMs,
    });
  }

  /** A text line, or a JSON entry that is a string. */
  line(position: number, text: string): void {
    this.admit(
      position,
      textAddress(text, this.#spec.defaultScheme),
      null,
      expiryOf(undefined, undefined, this.#spec, this.#nowMs),
    );
  }

  /** A JSON entry's or CSV row's fields. */
  record(position: number, raw: Readonly<Partial<Record<AnswerField, Raw>>>): void {
    const text = (value: Raw) => present(value) ? String(value).trim() : "";
    if (text(raw.host) === "") return this.reject(position, "the host is missing");
    if (text(raw.port) === "") return this.reject(position, "the port is missing");
    const scheme = text(raw.scheme).toLowerCase() || this.#spec.defaultScheme;
    // Credentials as given: a space in a password is the password's.
    const credential = (value: Raw) => present(value) ? String(value) : undefined;
    const address = addressFromParts(
      scheme,
      text(raw.host),
      text(raw.port),
      credential(raw.username),
      credential(raw.password),
    );
    const country = text(raw.country) === "" ? null : normaliseCountry(text(raw.country)) ?? null;
    this.admit(
      position,
      address,
      country,
      expiryOf(raw.expires_at, raw.ttl_seconds, this.#spec, this.#nowMs),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Formats.

function readText(text: string, reader: Reader): void {
  let position = 0;
  for (const line of text.split("\n")) {
    position++;
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#")) continue;
    reader.entry();
    reader.line(position, trimmed);
  }
}

function malformed(message: string): ProviderAnswerError {
  return new ProviderAnswerError("malformed", message);
}

function readJson(text: string, spec: AnswerSpec, compiledSpec: CompiledSpec, reader: Reader) {
  let data: JSONValue;
  try {
    data = JSON.parse(text);
  } catch {
    // Not chained: the parser's message quotes the answer.
    throw malformed("the answer is not JSON");
  }
  let selected: JSONValue = data;
  if (compiledSpec.items !== undefined) {
    try {
      selected = TreeInterpreter.search(compiledSpec.items, data);
    } catch {
      throw malformed(`the items expression "${spec.items}" could not be read on the answer`);
    }
  }
  // A provider with nothing to give often says so with null (`{"data": null}`): no entries.
  if (selected === null) return;
  const items = Array.isArray(selected)
    ? selected
    : spec.items === undefined && typeof selected === "object"
    ? [selected]
    : undefined;
  if (items === undefined) {
    throw malformed(
      spec.items === undefined
        ? "the answer is neither a list nor an object"
        : `the items expression "${spec.items}" found no list in the answer`,
    );
  }
  const maxItems = spec.maxItems ?? DEFAULT_MAX_ANSWER_ITEMS;
  if (items.length > maxItems) {
    throw new ProviderAnswerError(
      "too_many_items",
      `the answer holds ${items.length} entries, more than the ${maxItems} a fetch reads`,
    );
  }
  for (let index = 0; index < items.length; index++) {
    const item = items[index];
    const position = index + 1;
    reader.entry();
    if (typeof item === "string") {
      reader.line(position, item.trim());
      continue;
    }
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      reader.reject(position, "the entry is neither an object nor a proxy line");
      continue;
    }
    const raw: Partial<Record<AnswerField, Raw>> = {};
    let wrong: string | undefined;
    for (const [field, expression] of compiledSpec.fields) {
      let value: JSONValue;
      try {
        value = TreeInterpreter.search(expression, item);
      } catch {
        wrong = `the ${field} expression could not be read on the entry`;
        break;
      }
      if (value === null) continue;
      if (typeof value !== "string" && typeof value !== "number") {
        wrong = `${field} is not a string or a number`;
        break;
      }
      raw[field] = value;
    }
    if (wrong !== undefined) reader.reject(position, wrong);
    else reader.record(position, raw);
  }
}

interface CsvRecord {
  /** The line the record starts on, 1 first. */
  line: number;
  fields: string[];
}

const QUOTE = 34;
const COMMA = 44;
const LF = 10;
const CR = 13;

/**
 * RFC 4180 records: fields split by commas, records by CRLF (or LF, or CR), a quoted field may
 * hold commas, line breaks and doubled quotes. Linear: each character is looked at once.
 */
function* csvRecords(text: string): Generator<CsvRecord> {
  const length = text.length;
  let index = 0;
  let line = 1;
  while (index < length) {
    const start = line;
    const fields: string[] = [];
    for (;;) {
      let value: string;
      if (text.charCodeAt(index) === QUOTE) {
        value = "";
        index++;
        for (;;) {
          const close = text.indexOf('"', index);
          if (close < 0) throw malformed(`the quoted field on line ${line} is never closed`);
          const chunk = text.slice(index, close);
          for (let at = chunk.indexOf("\n"); at >= 0; at = chunk.indexOf("\n", at + 1)) line++;
          value += chunk;
          if (text.charCodeAt(close + 1) === QUOTE) {
            value += '"';
            index = close + 2;
            continue;
          }
          index = close + 1;
          break;
        }
      } else {
        let end = index;
        while (end < length) {
          const code = text.charCodeAt(end);
          if (code === COMMA || code === LF || code === CR) break;
          end++;
        }
        value = text.slice(index, end);
        index = end;
      }
      fields.push(value);
      const code = text.charCodeAt(index);
      if (code === COMMA) {
        index++;
        continue;
      }
      if (code === CR) {
        index++;
        if (text.charCodeAt(index) === LF) index++;
        line++;
      } else if (code === LF) {
        index++;
        line++;
      } else if (index < length) {
        // Only a quoted field can stop short of a comma or a line's end.
        throw malformed(`text follows a quoted field's closing quote on line ${line}`);
      }
      break;
    }
    // A blank line (one empty field) is no record.
    if (fields.length === 1 && fields[0] === "") continue;
    yield { line: start, fields };
  }
}

function readCsv(text: string, reader: Reader): void {
  let columns: (AnswerField | undefined)[] | undefined;
  for (const record of csvRecords(text)) {
    if (columns === undefined) {
      const seen = new Set<string>();
      columns = record.fields.map((name) => {
        const field = name.trim().toLowerCase();
        if (!(ANSWER_FIELDS as readonly string[]).includes(field)) return undefined;
        if (seen.has(field)) throw malformed(`the header names the ${field} column twice`);
        seen.add(field);
        return field as AnswerField;
      });
      for (const needed of ["host", "port"]) {
        if (!seen.has(needed)) throw malformed(`the header names no ${needed} column`);
      }
      continue;
    }
    reader.entry();
    if (record.fields.length !== columns.length) {
      reader.reject(
        record.line,
        `the row has ${record.fields.length} fields where the header has ${columns.length}`,
      );
      continue;
    }
    const raw: Partial<Record<AnswerField, string>> = {};
    columns.forEach((field, index) => {
      if (field !== undefined) raw[field] = record.fields[index];
    });
    reader.record(record.line, raw);
  }
}

// ---------------------------------------------------------------------------------------------
// The answer.

const decoder = new TextDecoder("utf-8");

/**
 * Reads a fetch answer's body as proxies at `nowMs`. Throws a `ProviderAnswerError` for an
 * answer larger than the byte cap, with more entries than the item cap, not in the connector's
 * format, or when the spec does not compile; an entry that is no proxy is counted and described
 * in `invalid` instead.
 */
export function parseAnswer(
  body: string | Uint8Array,
  spec: AnswerSpec,
  nowMs: number,
): ParsedAnswer {
  const compiledSpec = compileSpec(spec);
  const maxBytes = spec.maxBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  const bytes = typeof body === "string" ? Buffer.byteLength(body, "utf8") : body.byteLength;
  if (bytes > maxBytes) {
    throw new ProviderAnswerError(
      "too_large",
      `the answer is ${bytes} bytes, more than the ${maxBytes} a fetch reads`,
    );
  }
  // The decoder drops a byte-order mark; a string may still start with one.
  const text = (typeof body === "string" ? body : decoder.decode(body)).replace(/^\uFEFF/, "");
  const reader = new Reader(spec, nowMs);
  if (spec.format === AnswerFormat.text) readText(text, reader);
  else if (spec.format === AnswerFormat.json) readJson(text, spec, compiledSpec, reader);
  else readCsv(text, reader);
  return { proxies: reader.proxies, counts: reader.counts, invalid: reader.invalid };
}

// ---------------------------------------------------------------------------------------------
// The classification (section 8.1).

export const FetchKind = {
  /** A transport or HTTP failure, or an answer that could not be read: back off. */
  error: "error",
  /** The call and the answer were fine, and it held no live proxy. */
  empty: "empty",
  /** Live proxies, every one already owned: not Empty (the empty streak resets). */
  duplicateOnly: "duplicate_only",
  /** At least one proxy no upstream owns yet. */
  success: "success",
} as const;
export type FetchKind = (typeof FetchKind)[keyof typeof FetchKind];

export interface FetchCounts extends AnswerCounts {
  /** Live proxies whose key the pool already holds, for this upstream or another. */
  owned: number;
  /** `repeated` and `owned` together. */
  duplicates: number;
  /** Live proxies no upstream owns: `fresh`. */
  new: number;
}

/** What a fetch came to: an answer read, or what failed (the call, or reading the answer). */
export type FetchOutcome = { answer: ParsedAnswer } | { error: unknown };

/** The keys the pool holds now, every upstream's (section 5: the first source keeps it). */
export interface OwnedKeys {
  has(key: string): boolean;
}

export interface FetchClassification {
  kind: FetchKind;
  counts: FetchCounts;
  /** The proxies to add, in the answer's order. */
  fresh: ProviderProxy[];
  invalid: InvalidEntry[];
  /** Error only: what failed. */
  error?: unknown;
  /** Error only: the provider's HTTP status, when it answered with one (429: rate limited). */
  status?: number;
}

const NO_COUNTS: AnswerCounts = { entries: 0, parsed: 0, invalid: 0, expired: 0, repeated: 0 };

/**
 * Section 8.1's classification of one fetch: `error` for a failed call or an unreadable answer
 * (an answer whose every entry is invalid included: an error page served as 200 must back off,
 * not count as Empty and move the routing on), `empty` when no live proxy remains, then
 * `duplicate_only` or `success` by the keys already owned. Owned proxies are only counted: the
 * owner's entry, its TTL included, is not this answer's to change.
 */
export function classifyFetch(outcome: FetchOutcome, owned: OwnedKeys): FetchClassification {
  if ("error" in outcome) {
    const error = outcome.error;
    return {
      kind: FetchKind.error,
      counts: { ...NO_COUNTS, owned: 0, duplicates: 0, new: 0 },
      fresh: [],
      invalid: [],
      error,
      ...(error instanceof VendorCallError && error.status !== undefined
        ? { status: error.status }
        : {}),
    };
  }
  const { answer } = outcome;
  const fresh: ProviderProxy[] = [];
  let held = 0;
  for (const proxy of answer.proxies) {
    if (owned.has(proxy.key)) held++;
    else fresh.push(proxy);
  }
  const counts: FetchCounts = {
    ...answer.counts,
    owned: held,
    duplicates: answer.counts.repeated + held,
    new: fresh.length,
  };
  const unreadable = unreadableAnswer(answer);
  if (unreadable !== undefined) {
    return { kind: FetchKind.error, counts, fresh: [], invalid: answer.invalid, error: unreadable };
  }
  return { kind: answerKind(answer, fresh.length), counts, fresh, invalid: answer.invalid };
}

/**
 * An answer read whole that is still an Error fetch: entries, none of them a proxy (an error
 * page served as 200 must back off, not count as Empty); undefined for any other answer.
 */
export function unreadableAnswer(answer: ParsedAnswer): ProviderAnswerError | undefined {
  if (answer.counts.entries === 0 || answer.counts.parsed > 0) return undefined;
  return new ProviderAnswerError(
    "no_proxies",
    `none of the answer's ${answer.counts.entries} entries is a proxy`,
  );
}

/**
 * Section 8.1's kind of an answer that is not unreadable (`unreadableAnswer`), given how many of
 * its live proxies were new to the pool: `empty` without a live proxy, `duplicate_only` when
 * none was new, else `success`. One rule for the classification above, which learns what is
 * new from the keys the pool holds, and for the fetch path, which learns it from the pool's add.
 */
export function answerKind(answer: ParsedAnswer, fresh: number): FetchKind {
  if (answer.proxies.length === 0) return FetchKind.empty;
  return fresh === 0 ? FetchKind.duplicateOnly : FetchKind.success;
}
