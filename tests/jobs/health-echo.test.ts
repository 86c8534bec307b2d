/**
 * Which echo health checks ask through each proxy, from the settings: OCTOPROX_ECHO_URL, else
 * the install's /echo at OCTOPROX_PUBLIC_URL, else the public echo; never a loopback address
 * nobody set.
 */
import { describe, expect, it } from "vitest";
import {
  describeHealthEcho,
  EchoSource,
  healthEcho,
  PUBLIC_ECHO_URL,
} from "../../control/jobs/health-echo.ts";
import { parseControlSettings } from "../../shared/settings.ts";
import { testSecrets } from "../../testkit/stores.ts";

const secrets = testSecrets();

function settings(env: Record<string, string> = {}) {
  return parseControlSettings({
    OCTOPROX_DATABASE_URL: "postgres://postgres@127.0.0.1:1/none",
    OCTOPROX_REDIS_URL: "redis://127.0.0.1:1",
    OCTOPROX_INTERNAL_SECRET: secrets.internal,
    OCTOPROX_JWT_SECRET: secrets.jwt,
    ...env,
  });
}

describe("the health-check echo", () => {
  it("is the public echo with neither setting, whatever the api port", () => {
    const echo = healthEcho(settings({ OCTOPROX_API_PORT: "8123" }));
    expect(echo).toEqual({ url: PUBLIC_ECHO_URL, source: EchoSource.publicEcho, loopback: false });
    expect(describeHealthEcho(echo)).toBe(
      "Health checks ask https://httpbin.org/ip through each proxy " +
        "(no OCTOPROX_PUBLIC_URL or OCTOPROX_ECHO_URL set: the public echo)",
    );
  });

  it("is the api's /echo at OCTOPROX_PUBLIC_URL, under its path when it has one", () => {
    for (
      const [publicUrl, url] of [
        ["http://203.0.113.5:8000", "http://203.0.113.5:8000/echo"],
        ["http://203.0.113.5:8000/", "http://203.0.113.5:8000/echo"],
        ["https://ops.example.com/octoprox", "https://ops.example.com/octoprox/echo"],
        ["https://ops.example.com/octoprox/", "https://ops.example.com/octoprox/echo"],
      ]
    ) {
      const echo = healthEcho(settings({ OCTOPROX_PUBLIC_URL: publicUrl }));
      expect(echo).toEqual({ url, source: EchoSource.publicUrl, loopback: false });
      expect(describeHealthEcho(echo)).toBe(
        `Health checks ask ${url} through each proxy (OCTOPROX_PUBLIC_URL)`,
      );
    }
  });

  it("is OCTOPROX_ECHO_URL before OCTOPROX_PUBLIC_URL", () => {
    const echo = healthEcho(settings({
      OCTOPROX_ECHO_URL: "https://echo.example.net/ip",
      OCTOPROX_PUBLIC_URL: "http://203.0.113.5:8000",
    }));
    expect(echo).toEqual({
      url: "https://echo.example.net/ip",
      source: EchoSource.echoUrl,
      loopback: false,
    });
  });

  it("says a loopback address reaches only proxies on the same machine", () => {
    for (
      const publicUrl of ["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"]
    ) {
      const echo = healthEcho(settings({ OCTOPROX_PUBLIC_URL: publicUrl }));
      expect(echo.loopback).toBe(true);
      expect(describeHealthEcho(echo)).toMatch(
        /a loopback address reaches only proxies on the same machine$/,
      );
    }
  });

  it("refuses a public URL that is not an HTTP address alone", () => {
    for (
      const bad of ["ftp://203.0.113.5", "203.0.113.5:8000", "http://h:8000/?x=1", "http://h/#a"]
    ) {
      expect(() => settings({ OCTOPROX_PUBLIC_URL: bad }), bad).toThrow(/^OCTOPROX_PUBLIC_URL /);
    }
  });
});
