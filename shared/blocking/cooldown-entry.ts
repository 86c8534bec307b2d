/**
 * One entry of the cool-down stream (`stream:cooldowns`): the site, the exit (proxy id), when the
 * cool-down ends (epoch ms) and the project whose verdict set it. The gateways write and read it
 * (gateway/blocking/cooldowns.ts), the api counts a project's in force per site
 * (control/metrics/domains.ts): both with the two functions here.
 *
 * Runs unchanged on Node and Deno.
 */
export interface CooldownEntry {
  site: string;
  proxyId: string;
  untilMs: number;
  projectId: string;
}

/** The entry's fields as XADD takes them, name then value. */
export function cooldownFields(entry: CooldownEntry): string[] {
  return ["s", entry.site, "p", entry.proxyId, "u", String(entry.untilMs), "j", entry.projectId];
}

/** An entry read back; undefined when it lacks its site or exit (the project may be ""). */
export function readCooldownEntry(fields: readonly string[]): CooldownEntry | undefined {
  let site: string | undefined;
  let proxyId: string | undefined;
  let untilMs = 0;
  let projectId = "";
  for (let index = 0; index + 1 < fields.length; index += 2) {
    const value = fields[index + 1];
    if (fields[index] === "s") site = value;
    else if (fields[index] === "p") proxyId = value;
    else if (fields[index] === "u") untilMs = Number(value);
    else if (fields[index] === "j") projectId = value;
  }
  if (site === undefined || proxyId === undefined) return undefined;
  return { site, proxyId, untilMs, projectId };
}
