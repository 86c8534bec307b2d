/** The egress guard's bounds for a process's descriptor calls, from its settings. */
import { readFileSync } from "node:fs";
import type { ControlSettings } from "../../shared/settings.ts";
import type { CallOptions } from "./http-call.ts";

/** Vendor calls answer within this or fail (a sync is delivered again later). */
export const VENDOR_CALL_TIMEOUT_MS = 20_000;

const authorities = new Map<string, string>();

/** The CA file's PEM, read once per process (a missing file fails the call that needs it). */
function authority(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  let pem = authorities.get(path);
  if (pem === undefined) {
    pem = readFileSync(path, "utf8");
    authorities.set(path, pem);
  }
  return pem;
}

export function callOptions(settings: ControlSettings, signal?: AbortSignal): CallOptions {
  return {
    timeoutMs: VENDOR_CALL_TIMEOUT_MS,
    signal,
    allowLoopback: settings.egressAllowLoopback,
    ca: authority(settings.egressCaFile),
  };
}
