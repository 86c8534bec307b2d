/**
 * tls_ca_expiry: the TLS interception CA this api hands out (OCTOPROX_TLS_MITM_CA_CERT_PATH)
 * ending within the threshold, in days, or unusable already (past its end, unreadable). An api
 * without a CA configured has nothing to judge.
 */
import { readFile } from "node:fs/promises";
import { MitmCaError } from "../../shared/errors.ts";
import { readCaCertificate } from "../../shared/tls/ca.ts";
import { daysLeft } from "../../shared/tls/ca-expiry.ts";
import type { Condition } from "./condition.ts";

export const tlsCaExpiry: Condition = async (deps, rule, nowMs) => {
  const path = deps.settings.tlsMitmCaCertPath;
  if (path === undefined) return [];
  const now = new Date(nowMs);
  const threshold = rule.threshold ?? 0;
  try {
    const ca = await readCaCertificate(await readFile(path, "utf8"), { certPath: path, now });
    const left = daysLeft(ca.notAfter, now);
    if (left >= threshold) return [];
    return [{
      subject: "tls_ca",
      message: `The TLS interception CA ends in ${left} days (${ca.notAfter.toISOString()}), ` +
        `within ${threshold}`,
      details: { not_after: ca.notAfter.toISOString(), days_left: left },
    }];
  } catch (error) {
    if (!(error instanceof MitmCaError)) throw error;
    return [{
      subject: "tls_ca",
      message: `The TLS interception CA cannot be used: ${error.message}`,
      details: { error: error.message },
    }];
  }
};
