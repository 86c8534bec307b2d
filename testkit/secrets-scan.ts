/**
 * The secrets scan of an e2e cluster: every secret the cluster knows (the internal and JWT
 * secrets and the admin password it starts processes with, every value it sends in a field whose
 * name says secret, every credential in a proxy URL it sends, every token the api hands back
 * once) is looked for, in clear, in what a user or an operator gets to see: each process's output
 * lines, each error answer the api gave, each process's /metrics text and every Redis key and
 * value under the cluster's prefix. A hit names the secret (never its value) and where it was.
 *
 * Values are looked for raw, percent-encoded, and, for a username and password pair, as the
 * base64 of `username:password` a Basic credential carries. Sealed values (the feed, stored
 * credentials) are not in clear, so they never match.
 *
 * A secret that must be nowhere but its own file (the TLS interception CA's key: `addFileOnly`)
 * is looked for further: in every answer the api gave (not only errors), in the routing feed's
 * sections opened with the cluster's feed keys, and in every row of every table of the cluster's
 * database. It is looked for as each line of its PEM text (the base64 of its DER, wherever it
 * is cut or however it is quoted), as its DER bytes, and as its private numbers in the forms a
 * key export writes them (base64url, base64, hex).
 */
import { createPrivateKey } from "node:crypto";
import type { Redis } from "ioredis";
import type postgres from "postgres";
import { type FeedKeys, open } from "../shared/feed/codec.ts";

/** A field whose name says it holds a secret (`password`, `access_token`, `api_key`, ...). */
const SECRET_FIELD =
  /(^|_)(password|passphrase|secret|token|api_?key|key|credentials?|access_token|client_secret)$/i;
/** Fields named like a secret that are public by definition (a WireGuard device's public key). */
const PUBLIC_FIELD = /(^|_)public_key$/i;

/** Shorter values (a role, a mode) are not secrets the scan can tell apart from plain words. */
const MIN_SECRET_LENGTH = 8;
const MIN_KEY_LENGTH = 20;

/** The Redis part's bound: a stopped private server is not waited for. */
const REDIS_SCAN_MS = 15_000;

export interface SecretFinding {
  /** What the secret is (such as `POST /api/v1/projects body.password`). */
  secret: string;
  /** Where it was found in clear. */
  where: string;
  /** Which form matched: raw, percent-encoded or basic (base64 of user:pass). */
  form: string;
}

/** What the scan reads at the end: the cluster's processes and its Redis prefix. */
export interface ScanSources {
  members: readonly {
    instance: string;
    url: string;
    stdout: readonly string[];
    stderr: readonly string[];
    alive(): boolean;
  }[];
  redis: Redis;
  prefix: string;
  /** The cluster's feed keys: its sealed sections are opened and looked through too. */
  feed?: FeedKeys;
  /** The cluster's database: every row of every table is looked through for file-only secrets. */
  database?: postgres.Sql;
}

interface Needle {
  name: string;
  form: string;
  bytes: Buffer;
}

/** The PEM lines too short to tell a key apart (a key's last, partial line). */
const MIN_PEM_LINE = 24;

export class SecretsScan {
  readonly #needles = new Map<string, Needle>();
  /** Secrets that belong in their own file alone, looked for in more places (addFileOnly). */
  readonly #fileOnly = new Map<string, Needle>();
  /** Error answers (status >= 400) as received: where they came from and their text. */
  readonly #errorAnswers: { where: string; text: string }[] = [];
  /** Every other answer, looked through for file-only secrets alone. */
  readonly #answers: { where: string; text: string }[] = [];
  /** Each process's /metrics text, read while it ran. */
  readonly #metrics: { where: string; text: string }[] = [];

  /** Counts `value` as a secret named `name`. */
  add(name: string, value: string): void {
    if (value.length < MIN_SECRET_LENGTH) return;
    this.#needle(name, "raw", value);
    const encoded = encodeURIComponent(value);
    if (encoded !== value) this.#needle(name, "percent-encoded", encoded);
  }

  /** A username and password pair: the password, and the Basic credential both make. */
  addPair(name: string, username: string, password: string): void {
    this.add(name, password);
    if (password.length < MIN_SECRET_LENGTH) return;
    const basic = Buffer.from(`${username}:${password}`).toString("base64");
    this.#needle(name, "basic", basic);
  }

  /**
   * A private key (PEM, PKCS#8) that must be nowhere but its file: its PEM lines, its DER and its
   * private numbers are looked for in logs, every answer, /metrics, Redis, the opened feed and
   * the database.
   */
  addFileOnly(name: string, keyPem: string): void {
    const needle = (form: string, bytes: Buffer) => {
      const id = bytes.toString("base64");
      if (!this.#fileOnly.has(id)) this.#fileOnly.set(id, { name, form, bytes });
    };
    const body = keyPem.replace(/-----[^-]+-----/g, "").split(/\s+/).filter(Boolean);
    for (const line of body) {
      if (line.length >= MIN_PEM_LINE) needle("PEM line", Buffer.from(line));
    }
    needle("DER", Buffer.from(body.join(""), "base64"));
    const jwk = createPrivateKey(keyPem).export({ format: "jwk" }) as Record<string, unknown>;
    for (const field of ["d", "p", "q", "dp", "dq", "qi"]) {
      const value = jwk[field];
      if (typeof value !== "string") continue;
      const raw = Buffer.from(value, "base64url");
      needle(`private ${field} (base64url)`, Buffer.from(value));
      needle(`private ${field} (base64)`, Buffer.from(raw.toString("base64").replace(/=+$/, "")));
      needle(`private ${field} (hex)`, Buffer.from(raw.toString("hex")));
      needle(`private ${field} (bytes)`, raw);
    }
  }

  #needle(name: string, form: string, text: string): void {
    if (!this.#needles.has(text)) {
      this.#needles.set(text, { name, form, bytes: Buffer.from(text) });
    }
  }

  /** The secrets a request body sends: fields named so, and credentials in URLs. */
  noteRequest(method: string, path: string, body: unknown): void {
    const at = `${method} ${routeOf(path)} body`;
    this.#walk(body, at, (name, value) => this.add(name, value));
    // A credential's config is secret whatever its fields are called (a provider API's keys).
    const config = (body as { config?: unknown } | undefined)?.config;
    if (path.includes("/credentials") && typeof config === "object" && config !== null) {
      for (const [field, value] of Object.entries(config)) {
        if (typeof value === "string") this.add(`${at}.config.${field}`, value);
      }
    }
  }

  /**
   * An answer: the secrets it hands out (a new token, a key, a project's password) join the
   * list; an error answer is kept to be scanned.
   */
  noteAnswer(method: string, path: string, status: number, text: string, body: unknown): void {
    const where = `${method} ${routeOf(path)}`;
    if (status >= 400) this.#errorAnswers.push({ where: `${where} answer ${status}`, text });
    else if (this.#fileOnly.size > 0) {
      this.#answers.push({ where: `${where} answer ${status}`, text });
    }
    this.#walk(body, `${where} answer`, (name, value) => this.add(name, value));
  }

  #walk(value: unknown, at: string, found: (name: string, value: string) => void): void {
    if (Array.isArray(value)) {
      value.forEach((item) => this.#walk(item, `${at}[]`, found));
      return;
    }
    if (typeof value !== "object" || value === null) return;
    const record = value as Record<string, unknown>;
    for (const [field, inner] of Object.entries(record)) {
      const name = `${at}.${field}`;
      if (typeof inner === "string") {
        // A bare `key` is often a name (a descriptor's credential field's key); a secret one (a
        // distribution key) is long.
        if (
          SECRET_FIELD.test(field) && !PUBLIC_FIELD.test(field) &&
          (field !== "key" || inner.length >= MIN_KEY_LENGTH)
        ) {
          const username = record.username;
          if (typeof username === "string") this.addPair(name, username, inner);
          else found(name, inner);
        }
        this.#urlCredentials(name, inner);
      } else if (Array.isArray(inner) && inner.every((item) => typeof item === "string")) {
        // Lists of proxy URLs (an upload's lines are one text, read below).
        for (const item of inner) this.#urlCredentials(`${name}[]`, item);
      } else {
        this.#walk(inner, name, found);
      }
    }
  }

  /** The password of every `scheme://user:pass@host` in `text` (a URL, an upload's lines). */
  addUrls(name: string, text: string): void {
    this.#urlCredentials(name, text);
  }

  #urlCredentials(name: string, text: string): void {
    for (const match of text.matchAll(/[a-z0-9+.-]+:\/\/([^\s:@/]*):([^\s@/]+)@/gi)) {
      const username = safeDecode(match[1]);
      const password = safeDecode(match[2]);
      this.addPair(`${name} (proxy URL password)`, username, password);
    }
  }

  /** Reads each running process's /metrics, to be scanned with the rest (before they stop). */
  async readMetrics(members: ScanSources["members"]): Promise<void> {
    await Promise.all(
      members.filter((m) => m.alive()).map(async (member) => {
        try {
          const response = await fetch(`${member.url}/metrics`, {
            signal: AbortSignal.timeout(5_000),
          });
          this.#metrics.push({ where: `${member.instance} /metrics`, text: await response.text() });
        } catch {
          // A process that cannot answer now has no metrics to show.
        }
      }),
    );
  }

  /** The whole check while the processes run (a test's own assertion; a cluster passes itself). */
  async check(sources: ScanSources): Promise<SecretFinding[]> {
    await this.readMetrics(sources.members);
    return await this.scan(sources);
  }

  /**
   * Where each known secret is in clear; none when all is well. Reads the processes' output as
   * it is now (scan after they stopped, so their last lines count) and the metrics read before.
   */
  async scan(sources: ScanSources): Promise<SecretFinding[]> {
    const findings: SecretFinding[] = [];
    const search = (needles: Iterable<Needle>, where: string, haystack: Buffer | string) => {
      const bytes = typeof haystack === "string" ? Buffer.from(haystack) : haystack;
      for (const needle of needles) {
        if (bytes.includes(needle.bytes)) {
          findings.push({ secret: needle.name, where, form: needle.form });
        }
      }
    };
    const look = (where: string, haystack: Buffer | string) => {
      search(this.#needles.values(), where, haystack);
      search(this.#fileOnly.values(), where, haystack);
    };
    const lookFileOnly = (where: string, haystack: Buffer | string) =>
      search(this.#fileOnly.values(), where, haystack);
    for (const member of sources.members) {
      member.stdout.forEach((line, index) =>
        look(`${member.instance} stdout line ${index + 1}`, line)
      );
      member.stderr.forEach((line, index) =>
        look(`${member.instance} stderr line ${index + 1}`, line)
      );
    }
    for (const { where, text } of [...this.#errorAnswers, ...this.#metrics]) look(where, text);
    for (const { where, text } of this.#answers) lookFileOnly(where, text);
    if (this.#fileOnly.size > 0) {
      if (sources.feed !== undefined) {
        await bounded(scanFeed(sources.redis, sources.prefix, sources.feed, lookFileOnly));
      }
      if (sources.database !== undefined) {
        await bounded(scanDatabase(sources.database, lookFileOnly));
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        scanRedis(sources.redis, sources.prefix, look),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("Redis scan timed out")), REDIS_SCAN_MS);
        }),
      ]);
    } catch {
      // A private Redis the test stopped: nothing left there to read.
    } finally {
      clearTimeout(timer);
    }
    return dedupe(findings);
  }
}

/** `work`, given up after REDIS_SCAN_MS (a store the test stopped has nothing left to read). */
async function bounded(work: Promise<void>): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      work,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error("scan timed out")), REDIS_SCAN_MS);
      }),
    ]);
  } catch {
    // A store the test stopped, or a feed of another secret: nothing there to read.
  } finally {
    clearTimeout(timer);
  }
}

/** The routing feed's sections under `prefix`, opened with the cluster's keys. */
async function scanFeed(
  redis: Redis,
  prefix: string,
  keys: FeedKeys,
  look: (where: string, haystack: Buffer | string) => void,
): Promise<void> {
  const sections = await redis.hgetallBuffer(`${prefix}feed:sections`);
  for (const [name, sealed] of Object.entries(sections)) {
    try {
      look(`the feed's section ${name} (opened)`, await open(keys, new Uint8Array(sealed)));
    } catch {
      // Sealed with another secret (a test forging a feed): not this cluster's to open.
    }
  }
}

/** Every row of every table of the database's public schema, each as its text. */
async function scanDatabase(
  sql: postgres.Sql,
  look: (where: string, haystack: Buffer | string) => void,
): Promise<void> {
  const tables = await sql<{ name: string }[]>`
    select table_name as name from information_schema.tables
    where table_schema = 'public' and table_type = 'BASE TABLE' order by table_name`;
  for (const { name } of tables) {
    const rows = await sql<{ row: string }[]>`select t::text as row from ${sql(name)} t`;
    rows.forEach(({ row }, index) => look(`Postgres table ${name} row ${index + 1}`, row));
  }
}

/**
 * Every key under `prefix` and every value in it, whatever its type, handed to `look`. Each
 * batch of keys is read in two pipelines (types, then values): a test bed may hold 100,000 keys.
 */
async function scanRedis(
  redis: Redis,
  prefix: string,
  look: (where: string, haystack: Buffer | string) => void,
): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scanBuffer(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next.toString();
    if (keys.length === 0) continue;
    const types = await redis.pipeline(keys.map((key) => ["type", key])).exec() ?? [];
    const reads = keys.map((key, index): [string, ...(string | Buffer)[]] => {
      switch (String(types[index]?.[1])) {
        case "string":
          return ["GET", key];
        case "hash":
          return ["HGETALL", key];
        case "list":
          return ["LRANGE", key, "0", "-1"];
        case "set":
          return ["SMEMBERS", key];
        case "zset":
          return ["ZRANGE", key, "0", "-1"];
        case "stream":
          return ["XRANGE", key, "-", "+"];
        default:
          return ["EXISTS", key];
      }
    });
    const pipeline = redis.pipeline();
    for (const [command, ...args] of reads) pipeline.callBuffer(command, ...args);
    const values = await pipeline.exec() ?? [];
    keys.forEach((keyBytes, index) => {
      const where = `Redis key ${keyBytes.toString("utf8").slice(prefix.length)}`;
      look(`${where} (its name)`, keyBytes);
      for (const value of flatten(values[index]?.[1])) look(where, value);
    });
  } while (cursor !== "0");
}

/** The byte strings of a reply, however nested (a stream's entries, a hash's pairs). */
function flatten(reply: unknown): Buffer[] {
  if (Buffer.isBuffer(reply)) return [reply];
  if (Array.isArray(reply)) return reply.flatMap(flatten);
  return [];
}

function dedupe(findings: SecretFinding[]): SecretFinding[] {
  const seen = new Set<string>();
  return findings.filter((finding) => {
    const id = `${finding.secret}|${finding.where}|${finding.form}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** A path with its ids made generic, so a secret's name says which route sent it. */
function routeOf(path: string): string {
  return path.split("?")[0].replace(
    /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi,
    ":id",
  );
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The findings as one message: each secret's name and where it was, never its value. */
export function describeFindings(findings: readonly SecretFinding[]): string {
  const lines = findings.slice(0, 50).map((f) => `- ${f.secret} (${f.form}) in ${f.where}`);
  const more = findings.length > 50 ? `\n... and ${findings.length - 50} more` : "";
  return `Secrets in clear (${findings.length}):\n${lines.join("\n")}${more}`;
}
