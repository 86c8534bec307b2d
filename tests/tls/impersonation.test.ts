/**
 * The browser-grade modes' choices (gateway/net/tls/impersonation.ts): which browser a request
 * goes out as under each mode, how an exit is named to the engine, one engine client per exit
 * and browser within a bound, and an engine that does not load (told once, each request refused
 * with the reason). The engine itself, against an HTTP/2 origin that fingerprints what it gets,
 * is e2e/gateway/tls-interception.test.ts's.
 */
import { describe, expect, it } from "vitest";
import {
  EDGE_USER_AGENT,
  ENGINE_CLIENTS_MAX,
  engineProxyUrl,
  Impersonation,
  personaFor,
} from "../../gateway/net/tls/impersonation.ts";
import { ImpersonationUnavailableError } from "../../shared/proxy-protocol/errors.ts";
import type { UpstreamChoice } from "../../shared/routing/contract.ts";

const FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) " +
  "Chrome/131.0.0.0 Safari/537.36";
const EDGE = `${CHROME} Edg/131.0.0.0`;
const SAFARI = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 " +
  "(KHTML, like Gecko) Version/17.5 Safari/605.1.15";

function upstream(overrides: Partial<UpstreamChoice> = {}): UpstreamChoice {
  return {
    proxyId: "p1",
    connectorId: "c1",
    scheme: "http",
    host: "127.0.0.2",
    port: 8080,
    username: null,
    password: null,
    ...overrides,
  };
}

describe("which browser a request goes out as", () => {
  it("match_ua: the browser the User-Agent names, keeping it; Chrome's replacing any other", () => {
    expect(personaFor("match_ua", undefined, FIREFOX)).toEqual({
      engine: "firefox",
      userAgent: "keep",
      label: "firefox",
    });
    expect(personaFor("match_ua", undefined, CHROME)).toMatchObject({
      engine: "chrome",
      userAgent: "keep",
    });
    expect(personaFor("match_ua", undefined, EDGE)).toEqual({
      engine: "chrome",
      userAgent: "keep",
      label: "edge",
    });
    for (const other of [SAFARI, "curl/8.5.0", "python-requests/2.31", null]) {
      expect(personaFor("match_ua", undefined, other)).toEqual({
        engine: "chrome",
        userAgent: "engine",
        label: "chrome",
      });
    }
  });

  it("override_ua: the project's browser and its User-Agent, whatever the client says", () => {
    expect(personaFor("override_ua", "firefox", CHROME)).toMatchObject({
      engine: "firefox",
      userAgent: "engine",
    });
    expect(personaFor("override_ua", "chrome", FIREFOX)).toMatchObject({
      engine: "chrome",
      userAgent: "engine",
    });
    expect(personaFor("override_ua", "edge", FIREFOX)).toEqual({
      engine: "chrome",
      userAgent: EDGE_USER_AGENT,
      label: "edge",
    });
    const picks = [0, 1, 2].map((index) =>
      personaFor("override_ua", "random", null, () => index).label
    );
    expect(picks).toEqual(["chrome", "firefox", "edge"]);
  });
});

describe("the engine's clients", () => {
  it("names an exit with its credential encoded, a SOCKS5 one resolving names itself", () => {
    expect(engineProxyUrl(upstream())).toBe("http://127.0.0.2:8080");
    expect(engineProxyUrl(upstream({ username: "us er", password: "p@ss:w/rd" }))).toBe(
      "http://us%20er:p%40ss%3Aw%2Frd@127.0.0.2:8080",
    );
    expect(engineProxyUrl(upstream({ scheme: "socks5", host: "::1" }))).toBe(
      "socks5h://[::1]:8080",
    );
  });

  it("keeps one client per exit and browser, the least recently used dropped past the bound", async () => {
    const made: Record<string, unknown>[] = [];
    class Impit {
      constructor(options: Record<string, unknown>) {
        made.push(options);
      }
      fetch(): Promise<never> {
        return Promise.reject(new Error("not sent"));
      }
    }
    const engine = new Impersonation({
      onUnavailable: () => {},
      load: () => Promise.resolve({ Impit }),
    });
    const first = upstream();
    const a = await engine.client(first, "chrome");
    expect(await engine.client(first, "chrome")).toBe(a);
    expect(await engine.client(first, "firefox")).not.toBe(a);
    expect(made[0]).toEqual({
      browser: "chrome",
      proxyUrl: "http://127.0.0.2:8080",
      followRedirects: false,
    });
    for (let index = 0; index < ENGINE_CLIENTS_MAX; index++) {
      await engine.client(upstream({ proxyId: `other-${index}` }), "chrome");
    }
    const before = made.length;
    // The first exit's clients were the least recently used: made anew.
    await engine.client(first, "chrome");
    expect(made.length).toBe(before + 1);
  });

  it("an engine that does not load: told once, each request refused with the reason", async () => {
    const told: ImpersonationUnavailableError[] = [];
    let loads = 0;
    const engine = new Impersonation({
      onUnavailable: (error) => told.push(error),
      load: () => {
        loads++;
        return Promise.reject(new Error("Requires ffi access\nstack"));
      },
    });
    for (let index = 0; index < 3; index++) {
      const failure = await engine.client(upstream(), "chrome").catch((error) => error);
      expect(failure).toBeInstanceOf(ImpersonationUnavailableError);
      expect(failure.message).toBe(
        "The browser-grade TLS engine (impit) did not load: Requires ffi access",
      );
    }
    expect(loads).toBe(1);
    expect(told).toHaveLength(1);
  });
});
