/**
 * Names to ids, so a user may write `--project shop` where the API wants a uuid: an id is
 * taken as it is, a name is looked up (any case) among the projects, connectors, tokens or
 * users listed.
 */
import type { Client } from "./client.ts";
import { CliError } from "./errors.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(text: string): boolean {
  return UUID.test(text);
}

export interface Named {
  id: string;
  name: string;
}

/** The one item whose id is `ref`, or whose name is `ref` regardless of case. */
export function pick<T extends { id: string }>(
  items: readonly T[],
  ref: string,
  nameOf: (item: T) => string,
  what: string,
): T {
  const byId = items.find((item) => item.id === ref.toLowerCase());
  if (byId) return byId;
  const matches = items.filter((item) => nameOf(item).toLowerCase() === ref.toLowerCase());
  if (matches.length === 1) return matches[0];
  if (matches.length > 1) {
    throw new CliError(`${matches.length} ${what}s are named "${ref}": give the id instead`);
  }
  const known = items.map(nameOf).slice(0, 10).join(", ");
  throw new CliError(`No ${what} "${ref}"${known ? ` (known: ${known})` : ""}`);
}

export async function resolveProject(client: Client, ref: string): Promise<Named> {
  const projects = await client.request<Named[]>("GET", "/projects");
  return pick(projects, ref, (project) => project.name, "project");
}

export async function resolveConnector(
  client: Client,
  projectId: string,
  ref: string,
): Promise<Named & { kind: string }> {
  const connectors = await client.request<(Named & { kind: string })[]>(
    "GET",
    `/projects/${projectId}/connectors`,
  );
  return pick(connectors, ref, (connector) => connector.name, "connector");
}
