/**
 * Names to ids, so a user may write `--project shop` where the API wants a uuid: an id is
 * taken as it is, a name is looked up (any case) among the projects, connectors, tokens or
 * users listed.
 */
import type { Client } from "./client.ts";
import { CliError } from "./errors.ts";
import { parseHostPort, parseProxyUrl } from "../model/proxy-url.ts";

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

interface ProxyRef {
  id: string;
  url: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
}

/**
 * A proxy by id, or by its address: a URL as `proxies list` shows it (`scheme://[user@]host:port`,
 * any password ignored) or `host:port`. Found through the list's host search.
 */
export async function resolveProxy(
  client: Client,
  projectId: string,
  ref: string,
): Promise<string> {
  if (isUuid(ref)) return ref.toLowerCase();
  const url = parseProxyUrl(ref);
  const hostPort = url.ok ? undefined : parseHostPort(ref);
  const wanted = url.ok ? url.value : hostPort?.ok ? hostPort.value : undefined;
  if (wanted === undefined) {
    throw new CliError(
      `"${ref}" is neither a proxy id nor an address (scheme://host:port or host:port)`,
    );
  }
  const page = await client.request<{ items: ProxyRef[] }>(
    "GET",
    `/projects/${projectId}/proxies?search=${encodeURIComponent(wanted.host)}&page_size=1000`,
  );
  const matches = page.items.filter((proxy) =>
    proxy.host === wanted.host && proxy.port === wanted.port &&
    (!url.ok || (proxy.scheme === url.value.scheme && proxy.username === url.value.username))
  );
  if (matches.length === 1) return matches[0].id;
  if (matches.length === 0) throw new CliError(`No proxy of this project is at ${ref}`);
  throw new CliError(
    `${matches.length} proxies are at ${ref} (${
      matches.map((proxy) => proxy.url).join(", ")
    }): give the full URL or the id`,
  );
}
