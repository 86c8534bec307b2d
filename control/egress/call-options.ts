/** The egress guard's bounds for a process's descriptor calls, from its settings. */
import { readFileSync } from "node:fs";
import type { ControlSettings } from "../../shared/settings.ts";
import type { CallOptions } from "./http-call.ts";

/** Vendor calls answer within this or fail (a sync is delivered again later). */
export const VENDOR_CALL_TIMEOUT_MS = 20_000;

const authorities = new Map<string, string>();

/** The CA file's PEM, read once per process (the node reads it at start). */
function authority(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  let pem = authorities.get(path);
  if (pem === undefined) {
    try {
      pem = readFileSync(path, "utf8");
    } catch (error) {
      throw new Error(`OCTOPROX_EGRESS_CA_FILE: cannot read ${path}`, { cause: error });
    }
    if (!pem.includes("-----BEGIN CERTIFICATE-----")) {
      throw new Error(`OCTOPROX_EGRESS_CA_FILE: ${path} holds no PEM certificate`);
    }
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
