/**
 * The browser-grade modes' engine: a browser's TLS ClientHello and HTTP/2 settings towards the
 * target, from impit (a Rust client over patched rustls and h2, loaded through Node-API), which
 * also sends the browser's own header set beneath the client's fields.
 *
 * - Which browser: `override_ua` presents the project's browser (`random`: one per request) and
 *   its User-Agent; `match_ua` the browser the client's User-Agent names (Firefox; Chrome, Edge
 *   or another Chromium keeps its own User-Agent over Chrome's fingerprint), and Chrome's
 *   fingerprint and User-Agent for any other (curl, a library, Safari: the engine has no Safari).
 * - One engine client per exit and browser, kept in a bounded LRU: its pool keeps the
 *   connections to targets through that exit (HTTP/2 where the target offers it).
 * - Loaded on the first request that needs it, once per isolate; a gateway that cannot load it
 *   (no native build for the platform, no `--allow-ffi`) answers those requests 502 saying so
 *   and logs why once.
 *
 * Targets' certificates are verified by the engine against its own copy of the public roots and
 * the system's, plus OCTOPROX_UPSTREAM_CA_FILE (gateway/app/upstream-ca.ts); it offers no way to
 * turn verification off, and none is used.
 */
import { createRequire } from "node:module";
import { ImpersonationUnavailableError } from "../../../shared/proxy-protocol/errors.ts";
import type {
  InterceptionBrowser,
  InterceptionMode,
  UpstreamChoice,
} from "../../../shared/routing/contract.ts";
import { upstreamPoolKey } from "../io/upstream-key.ts";

/** The fingerprints the engine has. */
export type EngineBrowser = "chrome" | "firefox";

/** How a request goes out: the engine's fingerprint, and the User-Agent it carries. */
export interface Persona {
  engine: EngineBrowser;
  /**
   * `keep`: the client's own User-Agent (and client hints) go out; `engine`: the engine's
   * browser's replace them; otherwise this text replaces them (Edge's, over Chrome's
   * fingerprint).
   */
  userAgent: "keep" | "engine" | string;
  /** How the Inspector names it: `chrome`, `firefox`, `edge`. */
  label: string;
}

/**
 * Edge's User-Agent beside the engine's Chrome (124, macOS): Edge is Chromium, with Chrome's
 * ClientHello and HTTP/2 settings, and says so in its User-Agent.
 */
export const EDGE_USER_AGENT = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) " +
  "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.0.0";

const CHROME: Persona = { engine: "chrome", userAgent: "engine", label: "chrome" };
const FIREFOX: Persona = { engine: "firefox", userAgent: "engine", label: "firefox" };
const EDGE: Persona = { engine: "chrome", userAgent: EDGE_USER_AGENT, label: "edge" };
const RANDOM: readonly Persona[] = [CHROME, FIREFOX, EDGE];

/** The persona of one request. `random`: `pick` chooses (Math.random unless a test says). */
export function personaFor(
  mode: InterceptionMode,
  browser: InterceptionBrowser | undefined,
  userAgent: string | null,
  pick: (count: number) => number = (count) => Math.floor(Math.random() * count),
): Persona {
  if (mode === "override_ua") {
    switch (browser) {
      case "firefox":
        return FIREFOX;
      case "edge":
        return EDGE;
      case "random":
        return RANDOM[pick(RANDOM.length)];
      default:
        return CHROME;
    }
  }
  // match_ua: by the client's own User-Agent.
  const ua = userAgent ?? "";
  if (/\bFirefox\/\d/.test(ua)) return { engine: "firefox", userAgent: "keep", label: "firefox" };
  if (/\bEdg\/\d/.test(ua)) return { engine: "chrome", userAgent: "keep", label: "edge" };
  if (/\b(?:Chrome|Chromium)\/\d/.test(ua)) {
    return { engine: "chrome", userAgent: "keep", label: "chrome" };
  }
  return CHROME;
}

/** The part of the engine's client the gateway uses (impit's `Impit`, fetch-like). */
export interface EngineClient {
  fetch(url: string, init: EngineRequest): Promise<EngineResponse>;
}

export interface EngineRequest {
  method: string;
  headers: [string, string][];
  body?: ReadableStream<Uint8Array> | Uint8Array;
  signal?: AbortSignal;
  redirect: "manual";
}

export interface EngineResponse {
  status: number;
  statusText: string;
  headers: Headers;
  body: ReadableStream<Uint8Array> | null;
}

interface EngineModule {
  Impit: new (options: Record<string, unknown>) => EngineClient;
}

/** Engine clients kept per isolate: each holds its connections, so a bound keeps memory flat. */
export const ENGINE_CLIENTS_MAX = 256;

/** The proxy URL the engine dials an exit by, its credential percent-encoded. */
export function engineProxyUrl(upstream: UpstreamChoice): string {
  // SOCKS5 with the target's name resolved by the exit, as the gateway's own tunnels do.
  const scheme = upstream.scheme === "socks5" ? "socks5h" : upstream.scheme;
  const host = upstream.host.includes(":") ? `[${upstream.host}]` : upstream.host;
  const credential = upstream.username === null
    ? ""
    : `${encodeURIComponent(upstream.username)}:${encodeURIComponent(upstream.password ?? "")}@`;
  return `${scheme}://${credential}${host}:${upstream.port}`;
}

/**
 * impit from the nearest node_modules above this file, by the runtime's own resolution at run
 * time: the checkout's beside gateway/, and an image's beside the bundle's folder (dist/). A
 * bundler does not follow it, so the bundle carries no copy of the engine's loader.
 */
function loadEngine(): Promise<unknown> {
  return Promise.resolve().then(() => createRequire(import.meta.url)("impit"));
}

export class Impersonation {
  #module: Promise<EngineModule> | undefined;
  /** Why the engine did not load, once it failed (then every request is answered so). */
  #failure: ImpersonationUnavailableError | undefined;
  readonly #clients = new Map<string, EngineClient>();
  readonly #onUnavailable: (error: ImpersonationUnavailableError) => void;
  readonly #load: () => Promise<EngineModule>;
  /** Requests sent through the engine, by persona label. */
  readonly requests = new Map<string, number>();

  constructor(options: {
    /** Told once, the first time the engine fails to load (the isolate's log). */
    onUnavailable: (error: ImpersonationUnavailableError) => void;
    /** How the engine is loaded (tests pass their own). */
    load?: () => Promise<unknown>;
  }) {
    this.#onUnavailable = options.onUnavailable;
    this.#load = (options.load ?? loadEngine) as () => Promise<EngineModule>;
  }

  /** The engine client for `upstream` and `engine`, loading the engine on first use. */
  async client(upstream: UpstreamChoice, engine: EngineBrowser): Promise<EngineClient> {
    const key = `${upstreamPoolKey(upstream)} ${engine}`;
    const kept = this.#clients.get(key);
    if (kept !== undefined) {
      // Most recently used last: the first key is the one to drop.
      this.#clients.delete(key);
      this.#clients.set(key, kept);
      return kept;
    }
    const module = await this.#engine();
    const client = new module.Impit({
      browser: engine,
      proxyUrl: engineProxyUrl(upstream),
      followRedirects: false,
    });
    this.#clients.set(key, client);
    if (this.#clients.size > ENGINE_CLIENTS_MAX) {
      this.#clients.delete(this.#clients.keys().next().value!);
    }
    return client;
  }

  /** Counts a request sent as `persona`. */
  count(persona: Persona): void {
    this.requests.set(persona.label, (this.requests.get(persona.label) ?? 0) + 1);
  }

  #engine(): Promise<EngineModule> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    this.#module ??= this.#load().then(
      (module) => {
        if (typeof (module as Partial<EngineModule>).Impit !== "function") {
          throw new Error("the engine's module has no Impit client");
        }
        return module;
      },
    ).catch((error) => {
      const failure = new ImpersonationUnavailableError(
        `The browser-grade TLS engine (impit) did not load: ${
          error instanceof Error ? error.message.trim().split("\n")[0] : String(error)
        }`,
        { cause: error },
      );
      this.#failure = failure;
      this.#onUnavailable(failure);
      throw failure;
    });
    return this.#module;
  }
}
