/**
 * proxy-loadgen's options and its command line (seed 001 §3.4): which proxy and URL, the
 * scenario, a fixed request count or a fixed duration, bounded concurrency, an optional target
 * rate, and the request's method, repeated headers and body.
 */
import { parseArgs } from "node:util";

export const Scenario = {
  /** Keep-alive forward requests (absolute-form) over persistent client connections. */
  http: "http",
  /** A new CONNECT tunnel per request, one small HTTP exchange through it, then close. */
  connect: "connect",
  /**
   * Extraction API calls: keep-alive POSTs straight to the api's extract URL with a
   * distribution key, each answer read for how many proxies it returned (no proxy in between).
   */
  extract: "extract",
  /**
   * A new connection to a SOCKS5 proxy per request: the SOCKS5 handshake (username/password
   * when the proxy URL has a login, else no auth), CONNECT to the URL's host, one request
   * through it, then close.
   */
  socks5: "socks5",
  /**
   * A new connection straight to the URL's host per request, one request, then close: what a
   * tunnel carries, with no proxy (the baseline tunnels are measured against).
   */
  direct: "direct",
} as const;
export type Scenario = (typeof Scenario)[keyof typeof Scenario];

export interface ProxyAddress {
  host: string;
  port: number;
  /**
   * `Basic …` for Proxy-Authorization, when the proxy URL carried credentials (a SOCKS5 proxy
   * gets the same login in its username/password sub-negotiation).
   */
  authorization?: string;
}

export interface LoadOptions {
  /** The proxy requests go through; the api itself for `extract`. */
  proxy: ProxyAddress;
  /** The target URL (http only: through CONNECT it is spoken in plain HTTP too). */
  url: URL;
  scenario: Scenario;
  /** Stop after this many counted requests (fixed count)... */
  requests?: number;
  /** ...or after this long (fixed duration). One of the two is set. */
  durationMs?: number;
  /** Requests run before counting starts, this long (not counted, not timed). */
  warmupMs: number;
  /** Requests in flight at most (HTTP: persistent connections). */
  concurrency: number;
  /** Requests a second to start at most, spread evenly; unset: as fast as answers come. */
  rate?: number;
  /** A request not answered in full this long counts as a timeout. */
  timeoutMs: number;
  method: string;
  /** Extra request fields, in order, repeats allowed. */
  headers: [string, string][];
  body?: string;
  /** `extract`: the distribution key (sent as X-API-Key) and the proxies each call asks for. */
  extract?: { key: string; count: number };
}

export const DEFAULTS = {
  scenario: Scenario.http,
  durationMs: 10_000,
  warmupMs: 0,
  concurrency: 32,
  timeoutMs: 10_000,
  method: "GET",
} as const;

export class UsageError extends Error {
  override name = "UsageError";
}

/** "250ms", "5s", "1.5m", or a bare number of seconds, into milliseconds. */
export function parseDuration(text: string, what: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!match) throw new UsageError(`${what} must be a duration such as 500ms, 5s or 1m`);
  const value = Number(match[1]);
  const unit = match[2] ?? "s";
  return Math.round(value * (unit === "ms" ? 1 : unit === "s" ? 1000 : 60_000));
}

function positiveInteger(text: string, what: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new UsageError(`${what} must be a positive integer`);
  }
  return value;
}

/**
 * A proxy URL (`http://[user:pass@]host:port`, or `socks5://` for the socks5 scenario) into an
 * address and its authorization.
 */
export function parseProxy(text: string, scheme: "http" | "socks5" = "http"): ProxyAddress {
  let url: URL;
  try {
    url = new URL(text.includes("://") ? text : `http://${text}`);
  } catch {
    throw new UsageError(`--proxy is not a URL: ${text}`);
  }
  if (url.protocol !== `${scheme}:`) {
    throw new UsageError(`--proxy must be an ${scheme}:// proxy`);
  }
  if (url.port === "") throw new UsageError("--proxy needs a port");
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const proxy: ProxyAddress = { host, port: Number(url.port) };
  if (url.username !== "" || url.password !== "") {
    const login = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    proxy.authorization = `Basic ${btoa(login)}`;
  }
  return proxy;
}

function parseTarget(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--url is not a URL: ${text}`);
  }
  if (url.protocol !== "http:") throw new UsageError("--url must be an http:// URL");
  return url;
}

function parseHeader(text: string): [string, string] {
  const colon = text.indexOf(":");
  if (colon <= 0) throw new UsageError(`--header must be "Name: value": ${text}`);
  const name = text.slice(0, colon).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw new UsageError(`--header has a bad field name: ${name}`);
  }
  return [name, text.slice(colon + 1).trim()];
}

export const USAGE = `proxy-loadgen: load through an HTTP or SOCKS5 proxy.

  npm run loadgen -- --proxy http://user:pass@127.0.0.1:8080 --url http://127.0.0.1:9000/ [options]
  npm run loadgen -- --scenario extract --url http://127.0.0.1:8000/api/v1/projects/<id>/extract \
    --key oxd_... [--count 1] [options]

  --scenario http|connect|socks5|direct|extract
                            http: keep-alive forward requests (default); connect: a new CONNECT
                            tunnel per request, one request through it, then close; socks5: the
                            same through a SOCKS5 proxy (--proxy socks5://[user:pass@]host:port);
                            direct: a new connection straight to --url per request (no --proxy);
                            extract: keep-alive POSTs to the extraction API (no --proxy),
                            reporting the proxies returned and the calls that came back short
  --key oxd_...             extract: the distribution key (X-API-Key)
  --count 1                 extract: proxies each call asks for (the body {"count": N} unless
                            --body gives another)
  --requests N              stop after N requests (fixed count), or
  --duration 10s            stop after this long (default 10s)
  --warmup 0s               run this long first without counting
  --concurrency 32          requests in flight at most (http: persistent connections)
  --rate N                  start at most N requests a second (default: as fast as answered)
  --timeout 10s             a request not answered in full by then is a timeout
  --method GET              the request's method
  --header "Name: value"    an extra request field (repeatable)
  --body TEXT               a request body (sent with Content-Length)
  --json                    print the report as JSON
`;

export interface CommandLine {
  options: LoadOptions;
  json: boolean;
  help: boolean;
}

/** The command line's arguments (without node and the script) into options. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: false,
      options: {
        proxy: { type: "string" },
        url: { type: "string" },
        scenario: { type: "string" },
        requests: { type: "string" },
        duration: { type: "string" },
        warmup: { type: "string" },
        concurrency: { type: "string" },
        rate: { type: "string" },
        timeout: { type: "string" },
        method: { type: "string" },
        header: { type: "string", multiple: true },
        body: { type: "string" },
        key: { type: "string" },
        count: { type: "string" },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const v = parsed.values;
  if (v.help) {
    return { options: undefined as unknown as LoadOptions, json: false, help: true };
  }
  const scenario = (v.scenario ?? DEFAULTS.scenario) as Scenario;
  if (!Object.values(Scenario).includes(scenario)) {
    throw new UsageError("--scenario must be http, connect, socks5, direct or extract");
  }
  const extract = scenario === Scenario.extract;
  const proxyless = extract || scenario === Scenario.direct;
  if (proxyless && v.proxy !== undefined) {
    throw new UsageError(`--proxy is not taken by ${scenario}: it calls the server directly`);
  }
  if (!proxyless && v.proxy === undefined) throw new UsageError("--proxy is required");
  if (extract && v.key === undefined) throw new UsageError("extract needs --key (oxd_...)");
  if (!extract && (v.key !== undefined || v.count !== undefined)) {
    throw new UsageError("--key and --count are extract's");
  }
  if (v.url === undefined) throw new UsageError("--url is required");
  if (v.requests !== undefined && v.duration !== undefined) {
    throw new UsageError("give --requests or --duration, not both");
  }
  const url = parseTarget(v.url);
  const options: LoadOptions = {
    proxy: proxyless
      ? directAddress(url)
      : parseProxy(v.proxy!, scenario === Scenario.socks5 ? "socks5" : "http"),
    url,
    scenario,
    warmupMs: v.warmup === undefined ? DEFAULTS.warmupMs : parseDuration(v.warmup, "--warmup"),
    concurrency: v.concurrency === undefined
      ? DEFAULTS.concurrency
      : positiveInteger(v.concurrency, "--concurrency"),
    timeoutMs: v.timeout === undefined ? DEFAULTS.timeoutMs : parseDuration(v.timeout, "--timeout"),
    method: (v.method ?? (extract ? "POST" : DEFAULTS.method)).toUpperCase(),
    headers: (v.header ?? []).map(parseHeader),
  };
  if (extract) {
    const count = v.count === undefined ? 1 : positiveInteger(v.count, "--count");
    options.extract = { key: v.key!, count };
  }
  if (!/^[A-Z]+$/.test(options.method)) throw new UsageError("--method must be a method name");
  if (v.requests !== undefined) options.requests = positiveInteger(v.requests, "--requests");
  else {
    options.durationMs = v.duration === undefined
      ? DEFAULTS.durationMs
      : parseDuration(v.duration, "--duration");
    if (options.durationMs <= 0) throw new UsageError("--duration must be above zero");
  }
  if (v.rate !== undefined) {
    const rate = Number(v.rate);
    if (!Number.isFinite(rate) || rate <= 0) throw new UsageError("--rate must be above zero");
    options.rate = rate;
  }
  if (v.body !== undefined) options.body = v.body;
  if (options.timeoutMs <= 0) throw new UsageError("--timeout must be above zero");
  return { options, json: v.json, help: false };
}

/** The server's own address, which the extract and direct scenarios connect to. */
function directAddress(url: URL): ProxyAddress {
  return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || "80") };
}

/** Options back into a command line (for running the generator in a child process). */
export function toCommandLine(options: LoadOptions): string[] {
  const scheme = options.scenario === Scenario.socks5 ? "socks5" : "http";
  const proxy = `${scheme}://${
    options.proxy.host.includes(":") ? `[${options.proxy.host}]` : options.proxy.host
  }:${options.proxy.port}`;
  const proxyless = options.scenario === Scenario.extract || options.scenario === Scenario.direct;
  const args = [
    ...(proxyless ? [] : [
      "--proxy",
      options.proxy.authorization ? withLogin(proxy, options.proxy.authorization) : proxy,
    ]),
    "--url",
    options.url.href,
    "--scenario",
    options.scenario,
    "--warmup",
    `${options.warmupMs}ms`,
    "--concurrency",
    String(options.concurrency),
    "--timeout",
    `${options.timeoutMs}ms`,
    "--method",
    options.method,
  ];
  if (options.requests !== undefined) args.push("--requests", String(options.requests));
  if (options.durationMs !== undefined) args.push("--duration", `${options.durationMs}ms`);
  if (options.rate !== undefined) args.push("--rate", String(options.rate));
  for (const [name, value] of options.headers) args.push("--header", `${name}: ${value}`);
  if (options.body !== undefined) args.push("--body", options.body);
  if (options.extract) {
    args.push("--key", options.extract.key, "--count", String(options.extract.count));
  }
  return args;
}

function withLogin(proxy: string, authorization: string): string {
  const { username, password } = loginOf(authorization);
  return proxy.replace(
    "://",
    `://${encodeURIComponent(username)}:${encodeURIComponent(password)}@`,
  );
}

/** A `Basic …` authorization back into its username and password. */
export function loginOf(authorization: string): { username: string; password: string } {
  const login = atob(authorization.replace(/^Basic /, ""));
  const colon = login.indexOf(":");
  return { username: login.slice(0, colon), password: login.slice(colon + 1) };
}
