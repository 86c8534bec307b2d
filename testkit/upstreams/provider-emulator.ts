/**
 * A provider API for the tests of `provider_api` connectors: it hands out proxies with a
 * lifetime, as the short-lived-proxy vendors do, from exits the test gives it (real tinyproxy
 * instances, or any address when nothing connects through them).
 *
 * `GET` or `POST /proxies` answers the next free exits (`per_call` of them, or `?count=`) in
 * `text`, `json` or `csv`, each with `ttl_seconds` or `expires_at`. An exit is leased until its
 * expiry and free again after it, as a provider recycles its addresses; with every exit leased
 * the answer is empty, which is how a provider runs dry.
 *
 * The test tells it how to answer (`setMode`, or `queue` for the next calls one by one): normally,
 * empty, duplicates only (proxies it handed out before, with a new lifetime), an HTTP error (500),
 * rate limited (429 with Retry-After), slowly, or with more proxies than a call should hand out.
 * `hold` keeps calls at the door until released, so a test sees calls in flight at once without
 * timing them. It counts calls, calls in flight (and the most at once) and proxies served, so
 * tests can hold a fetcher to `max_in_flight` and `max_total`.
 */
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import type { AnswerFormat } from "../../control/provider-api/answer.ts";
import type { ProxyScheme } from "../../shared/roles.ts";
import { testCertificate } from "../certs.ts";

/** An address the emulator hands out; a tinyproxy's `proxy` is one. */
export interface ProviderExit {
  /** `http` unless told. */
  scheme?: ProxyScheme;
  host: string;
  port: number;
  username?: string;
  password?: string;
  country?: string;
}

/** A proxy as one answer gave it. */
export interface ServedProxy {
  exit: ProviderExit;
  expiresAtMs: number;
  /** The call that gave it, 1 first. */
  call: number;
}

/** How the next calls are answered; every mode can be slowed by `delayMs` first. */
export type ProviderMode =
  | { kind: "normal"; delayMs?: number }
  | { kind: "empty"; delayMs?: number }
  /** Up to `per_call` of the proxies handed out last, with a new lifetime: nothing new. */
  | { kind: "duplicates"; delayMs?: number }
  /** An HTTP error (500 unless told). */
  | { kind: "error"; status?: number; delayMs?: number }
  /** 429 with `Retry-After` (1 s unless told). */
  | { kind: "rate_limited"; retryAfterSeconds?: number; delayMs?: number }
  /** A normal answer after `delayMs`. */
  | { kind: "slow"; delayMs: number }
  /** `count` proxies whatever the call asked: more than `per_call`, as a provider may. */
  | { kind: "oversupply"; count: number; delayMs?: number };
export type ProviderModeKind = ProviderMode["kind"];

/** How answers give a proxy's end. */
export type ExpiryField = "ttl_seconds" | "expires_at";
export type ExpiresAtForm = "iso" | "epoch_seconds" | "epoch_ms";

export interface ProviderAnswerSettings {
  /** `json` unless told. */
  format: AnswerFormat;
  /** Proxies a normal call hands out (the connector's `estimated_ips_per_call`); 10 unless told. */
  perCall: number;
  /** Each proxy's lifetime; 300 s unless told. */
  ttlSeconds: number;
  /** `ttl_seconds` unless told. Text answers give neither (the connector's default TTL holds). */
  expiry: ExpiryField;
  /** How `expires_at` is written; ISO 8601 unless told. */
  expiresAtForm: ExpiresAtForm;
}

export interface ProviderEmulatorOptions extends Partial<ProviderAnswerSettings> {
  exits?: readonly ProviderExit[];
  /** Required on every call when set: `Authorization: Bearer`, `X-Api-Key` or `?api_key=`. */
  apiKey?: string;
  /** Serve HTTPS with the test certificate (certs.ts), as the egress guard requires. */
  tls?: boolean;
  /** The emulator's clock (leases and `expires_at`); `Date.now` unless told. */
  nowMs?: () => number;
}

/** A call as the emulator received it. */
export interface ProviderCall {
  method: string;
  /** Path and query. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface ProviderEmulator {
  /** `http(s)://127.0.0.1:<port>`. */
  readonly url: string;
  /** The fetch URL: `<url>/proxies`. */
  readonly fetchUrl: string;
  /** The PEM to trust when `tls`. */
  readonly ca: string | undefined;
  /** Calls of the fetch route, refused ones included. */
  readonly calls: number;
  /** Calls being answered now. */
  readonly inFlight: number;
  /** The most calls in flight at once. */
  readonly maxInFlight: number;
  /** Proxies in answers, duplicates included. */
  readonly served: number;
  /** Calls answered, by the mode that answered them (`unauthorized`: a wrong or missing key). */
  readonly answered: Readonly<Record<ProviderModeKind | "unauthorized", number>>;
  /** Leases handed out (not duplicates), oldest first. */
  readonly handedOut: readonly ServedProxy[];
  /** The last calls (up to 1,000), oldest first. */
  readonly requests: readonly ProviderCall[];
  /** How calls are answered from now on. */
  setMode(mode: ProviderMode): void;
  /** Modes for the next calls, one each, before the standing mode again. */
  queue(...modes: ProviderMode[]): void;
  configure(settings: Partial<ProviderAnswerSettings>): void;
  addExits(exits: readonly ProviderExit[]): void;
  /** Ends every lease now: each exit is free again. */
  releaseAll(): void;
  /** Keeps calls waiting before they answer until the function it returns is called. */
  hold(): () => void;
  /** Resolves once at least `count` calls are in flight at once. */
  whenInFlight(count: number): Promise<void>;
  /** Counts from zero: calls, most in flight (to those in flight now), served, answered. */
  resetCounts(): void;
  close(): Promise<void>;
}

/** Where a JSON answer keeps what a connector reads (an `AnswerSpec`'s items and fields). */
export const PROVIDER_EMULATOR_JSON = {
  items: "data.proxies",
  fields: {
    host: "ip",
    port: "port",
    scheme: "protocol",
    username: "auth.user",
    password: "auth.pass",
    country: "geo.country",
    ttl_seconds: "ttl",
    expires_at: "expire_at",
  },
} as const;

const MODE_KINDS: readonly (ProviderModeKind | "unauthorized")[] = [
  "normal",
  "empty",
  "duplicates",
  "error",
  "rate_limited",
  "slow",
  "oversupply",
  "unauthorized",
];
const KEPT_REQUESTS = 1000;

const exitKey = (exit: ProviderExit) =>
  `${exit.scheme ?? "http"}|${exit.host}|${exit.port}|${exit.username ?? ""}`;

function expiresAtText(ms: number, form: ExpiresAtForm): string | number {
  if (form === "epoch_ms") return ms;
  if (form === "epoch_seconds") return Math.floor(ms / 1000);
  return new Date(ms).toISOString();
}

/** A CSV field, quoted when it must be (RFC 4180). */
function csvField(value: string | number | undefined): string {
  const text = value === undefined ? "" : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function textLine(exit: ProviderExit): string {
  const scheme = exit.scheme ?? "http";
  const host = exit.host.includes(":") ? `[${exit.host}]` : exit.host;
  const credentials = exit.username !== undefined;
  if (scheme !== "http") {
    const userinfo = credentials
      ? `${encodeURIComponent(exit.username ?? "")}:${encodeURIComponent(exit.password ?? "")}@`
      : "";
    return `${scheme}://${userinfo}${host}:${exit.port}`;
  }
  return credentials
    ? `${host}:${exit.port}:${exit.username}:${exit.password ?? ""}`
    : `${host}:${exit.port}`;
}

/** An answer's body and content type. */
function render(
  proxies: readonly ServedProxy[],
  settings: ProviderAnswerSettings,
  nowMs: number,
): { body: string; type: string } {
  const ttlOf = (proxy: ServedProxy) => Math.max(0, Math.round((proxy.expiresAtMs - nowMs) / 1000));
  const expiry = (proxy: ServedProxy) =>
    settings.expiry === "ttl_seconds"
      ? ttlOf(proxy)
      : expiresAtText(proxy.expiresAtMs, settings.expiresAtForm);
  if (settings.format === "text") {
    const lines = proxies.map((proxy) => textLine(proxy.exit));
    return { body: lines.length === 0 ? "" : `${lines.join("\n")}\n`, type: "text/plain" };
  }
  if (settings.format === "csv") {
    const rows = [["host", "port", "scheme", "username", "password", "country", settings.expiry]];
    for (const proxy of proxies) {
      const exit = proxy.exit;
      rows.push([
        exit.host,
        String(exit.port),
        exit.scheme ?? "http",
        exit.username ?? "",
        exit.password ?? "",
        exit.country ?? "",
        String(expiry(proxy)),
      ]);
    }
    return {
      body: rows.map((row) => row.map(csvField).join(",")).join("\r\n") + "\r\n",
      type: "text/csv",
    };
  }
  const entries = proxies.map((proxy) => {
    const exit = proxy.exit;
    return {
      ip: exit.host,
      port: exit.port,
      protocol: exit.scheme ?? "http",
      auth: exit.username === undefined ? null : { user: exit.username, pass: exit.password ?? "" },
      geo: { country: exit.country ?? null },
      ...(settings.expiry === "ttl_seconds"
        ? { ttl: ttlOf(proxy) }
        : { expire_at: expiresAtText(proxy.expiresAtMs, settings.expiresAtForm) }),
    };
  });
  return {
    body: JSON.stringify({ code: 0, data: { proxies: entries } }),
    type: "application/json",
  };
}

export async function startProviderEmulator(
  options: ProviderEmulatorOptions = {},
): Promise<ProviderEmulator> {
  const nowMs = options.nowMs ?? Date.now;
  const settings: ProviderAnswerSettings = {
    format: options.format ?? "json",
    perCall: options.perCall ?? 10,
    ttlSeconds: options.ttlSeconds ?? 300,
    expiry: options.expiry ?? "ttl_seconds",
    expiresAtForm: options.expiresAtForm ?? "iso",
  };
  const exits: ProviderExit[] = [];
  /** Lease ends by exit key: an exit is free once its lease is over. */
  const leases = new Map<string, number>();
  const handedOut: ServedProxy[] = [];
  const requests: ProviderCall[] = [];
  const answered = Object.fromEntries(MODE_KINDS.map((kind) => [kind, 0])) as Record<
    ProviderModeKind | "unauthorized",
    number
  >;
  let standing: ProviderMode = { kind: "normal" };
  const queued: ProviderMode[] = [];
  let cursor = 0;
  let calls = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let served = 0;
  let gate: Promise<void> | undefined;
  const waiters: { count: number; resolve: () => void }[] = [];

  const addExits = (more: readonly ProviderExit[]) => {
    for (const exit of more) exits.push({ ...exit });
  };
  addExits(options.exits ?? []);

  /** The next `count` free exits, round the list from where the last call stopped. */
  const lease = (count: number, call: number): ServedProxy[] => {
    const now = nowMs();
    const given: ServedProxy[] = [];
    for (let looked = 0; looked < exits.length && given.length < count; looked++) {
      const exit = exits[cursor % exits.length];
      cursor = (cursor + 1) % exits.length;
      const key = exitKey(exit);
      if ((leases.get(key) ?? 0) > now) continue;
      const expiresAtMs = now + settings.ttlSeconds * 1000;
      leases.set(key, expiresAtMs);
      given.push({ exit, expiresAtMs, call });
    }
    handedOut.push(...given);
    return given;
  };

  /** Proxies handed out before, the latest first, with a new lifetime: nothing new. */
  const duplicates = (count: number, call: number): ServedProxy[] => {
    const expiresAtMs = nowMs() + settings.ttlSeconds * 1000;
    const seen = new Set<string>();
    const given: ServedProxy[] = [];
    for (let index = handedOut.length - 1; index >= 0 && given.length < count; index--) {
      const exit = handedOut[index].exit;
      const key = exitKey(exit);
      if (seen.has(key)) continue;
      seen.add(key);
      given.push({ exit, expiresAtMs, call });
    }
    return given;
  };

  const authorized = (request: http.IncomingMessage, url: URL) => {
    if (options.apiKey === undefined) return true;
    const bearer = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? "")?.[1];
    return bearer === options.apiKey || request.headers["x-api-key"] === options.apiKey ||
      url.searchParams.get("api_key") === options.apiKey;
  };

  const handler = (request: http.IncomingMessage, response: http.ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://provider");
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.once("end", async () => {
      if (url.pathname !== "/proxies" || (request.method !== "GET" && request.method !== "POST")) {
        response.writeHead(404, { "content-type": "application/json" });
        return void response.end(JSON.stringify({ error: "not found" }));
      }
      const call = ++calls;
      requests.push({
        method: request.method,
        url: request.url ?? "/",
        headers: request.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      if (requests.length > KEPT_REQUESTS) requests.shift();
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      for (const waiter of waiters.filter((entry) => inFlight >= entry.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      // In flight until the answer is sent or the caller goes away (a timeout on its side).
      let open = true;
      response.once("close", () => {
        open = false;
        inFlight--;
      });
      if (!authorized(request, url)) {
        answered.unauthorized++;
        response.writeHead(401, { "content-type": "application/json" });
        return void response.end(JSON.stringify({ error: "a valid API key is required" }));
      }
      // Taken on arrival, so queued modes answer calls in the order they came.
      const mode = queued.shift() ?? standing;
      if (gate !== undefined) await gate;
      const delayMs = mode.delayMs ?? 0;
      if (delayMs > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          response.once("close", () => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      if (!open) return;
      answered[mode.kind]++;
      if (mode.kind === "error") {
        response.writeHead(mode.status ?? 500, { "content-type": "application/json" });
        return void response.end(JSON.stringify({ code: mode.status ?? 500, error: "internal" }));
      }
      if (mode.kind === "rate_limited") {
        response.writeHead(429, {
          "content-type": "application/json",
          "retry-after": String(mode.retryAfterSeconds ?? 1),
        });
        return void response.end(JSON.stringify({ code: 429, error: "too many requests" }));
      }
      const asked = Number(url.searchParams.get("count"));
      const count = Number.isInteger(asked) && asked > 0 ? asked : settings.perCall;
      const proxies = mode.kind === "empty"
        ? []
        : mode.kind === "duplicates"
        ? duplicates(count, call)
        : mode.kind === "oversupply"
        ? lease(mode.count, call)
        : lease(count, call);
      served += proxies.length;
      const answer = render(proxies, settings, nowMs());
      response.writeHead(200, {
        "content-type": answer.type,
        "content-length": Buffer.byteLength(answer.body),
      });
      response.end(answer.body);
    });
  };

  const certificate = options.tls ? await testCertificate() : undefined;
  const server = certificate === undefined
    ? http.createServer(handler)
    : https.createServer({ cert: certificate.cert, key: certificate.key }, handler);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  const base = `${certificate === undefined ? "http" : "https"}://127.0.0.1:${port}`;

  let closing: Promise<void> | undefined;
  return {
    url: base,
    fetchUrl: `${base}/proxies`,
    ca: certificate?.ca,
    get calls() {
      return calls;
    },
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get served() {
      return served;
    },
    answered,
    handedOut,
    requests,
    setMode(mode) {
      standing = mode;
    },
    queue(...modes) {
      queued.push(...modes);
    },
    configure(next) {
      Object.assign(settings, next);
    },
    addExits,
    releaseAll() {
      leases.clear();
    },
    hold() {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      gate = held;
      return () => {
        if (gate === held) gate = undefined;
        release();
      };
    },
    whenInFlight(count) {
      if (inFlight >= count) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push({ count, resolve }));
    },
    resetCounts() {
      calls = 0;
      maxInFlight = inFlight;
      served = 0;
      for (const kind of MODE_KINDS) answered[kind] = 0;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
