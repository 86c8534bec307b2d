/** The egress guard's bounds for a process's descriptor calls, from its settings. */
import type { ControlSettings } from "../../shared/settings.ts";
import type { CallOptions } from "./http-call.ts";

/** Vendor calls answer within this or fail (a sync is delivered again later). */
export const VENDOR_CALL_TIMEOUT_MS = 20_000;

export function callOptions(settings: ControlSettings, signal?: AbortSignal): CallOptions {
  return {
    timeoutMs: VENDOR_CALL_TIMEOUT_MS,
    signal,
    allowLoopback: settings.egressAllowLoopback,
  };
}
