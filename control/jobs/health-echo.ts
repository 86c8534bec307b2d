/**
 * The echo health checks ask through each proxy whose connector names no check URL of its own.
 * A check goes through the proxy, so the URL must be one the proxy can reach: a loopback
 * address is the proxy's own loopback, right only where every proxy runs on this machine. In
 * order: OCTOPROX_ECHO_URL, else this install's /echo at the address operators publish
 * (OCTOPROX_PUBLIC_URL), else a public echo that answers the caller's address as JSON.
 *
 * The checks and the echo monitor (which asks the echo directly to tell an outage from failing
 * proxies) both take the URL from here, so the monitor judges exactly what the checks ask.
 */
import type { ControlSettings } from "../../shared/settings.ts";

/** httpbin's `/ip`: `{"origin": "<caller>"}`, which the probe reads as the exit address. */
export const PUBLIC_ECHO_URL = "https://httpbin.org/ip";

export const EchoSource = {
  echoUrl: "OCTOPROX_ECHO_URL",
  publicUrl: "OCTOPROX_PUBLIC_URL",
  publicEcho: "public echo",
} as const;
export type EchoSource = (typeof EchoSource)[keyof typeof EchoSource];

export interface HealthEcho {
  url: string;
  source: EchoSource;
  /** Only proxies on the machine that asks reach it. */
  loopback: boolean;
}

/** `<public url>/echo`, under the public URL's path when it has one. */
export function publicEchoUrl(publicUrl: string): string {
  const base = new URL(publicUrl);
  base.pathname = base.pathname.replace(/\/*$/, "/");
  return new URL("echo", base).href;
}

function isLoopback(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" ||
    /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function healthEcho(settings: Pick<ControlSettings, "echoUrl" | "publicUrl">): HealthEcho {
  const [url, source] = settings.echoUrl !== undefined
    ? [settings.echoUrl, EchoSource.echoUrl]
    : settings.publicUrl !== undefined
    ? [publicEchoUrl(settings.publicUrl), EchoSource.publicUrl]
    : [PUBLIC_ECHO_URL, EchoSource.publicEcho];
  return { url, source, loopback: isLoopback(url) };
}

/** Why the checks ask this echo: the setting it came from, or that neither is set. */
export function healthEchoReason(echo: HealthEcho): string {
  return echo.source === EchoSource.publicEcho
    ? "no OCTOPROX_PUBLIC_URL or OCTOPROX_ECHO_URL set: the public echo"
    : echo.source;
}

export const LOOPBACK_NOTE = "a loopback address reaches only proxies on the same machine";

/** What a worker logs at its start: the URL and why it is that one. */
export function describeHealthEcho(echo: HealthEcho): string {
  const line = `Health checks ask ${echo.url} through each proxy (${healthEchoReason(echo)})`;
  return echo.loopback ? `${line}; ${LOOPBACK_NOTE}` : line;
}
