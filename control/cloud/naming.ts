/**
 * Instance names: `<instance_name>-<epoch s>-<6 hex>`, the prefix cut so the whole fits the
 * cloud's limit: 64 characters on AWS (the launch's client token, so a retried launch returns the
 * same instance), 63 on GCP (instance names), 64 on Azure (Linux VM names, so `-osdisk`, `-nic`
 * and `-pip` stay within their 80). And the id a proxy row holds for an instance.
 */
import { randomBytes } from "node:crypto";
import type { CloudProvider } from "../model/cloud.ts";

export const NAME_LIMITS: Readonly<Record<CloudProvider, number>> = {
  aws: 64,
  gcp: 63,
  azure: 64,
};

/** A new instance's creation name. */
export function instanceName(
  provider: CloudProvider,
  prefix: string,
  nowMs: number,
  hex: string = randomBytes(3).toString("hex"),
): string {
  const suffix = `-${Math.floor(nowMs / 1000)}-${hex}`;
  const room = NAME_LIMITS[provider] - suffix.length;
  // A GCP name must end in a letter or digit: a cut never leaves a trailing dash before ours.
  const cut = prefix.slice(0, room).replace(/-+$/, "");
  return `${cut}${suffix}`;
}

/** The id a proxy row holds for an instance: `aws-<instance id>`, `gcp-<name>`, `azure-<name>`. */
export function rowInstanceId(provider: CloudProvider, cloudId: string): string {
  return `${provider}-${cloudId}`;
}

/** The cloud's own id in a row's instance id (`i-0abc…` of `aws-i-0abc…`), or undefined. */
export function cloudIdOf(provider: CloudProvider, rowId: string): string | undefined {
  const prefix = `${provider}-`;
  return rowId.startsWith(prefix) && rowId.length > prefix.length
    ? rowId.slice(prefix.length)
    : undefined;
}
