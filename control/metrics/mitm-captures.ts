/**
 * The Inspector's reads: a project's interception captures (shared/mitm-captures.ts), which
 * gateways append to the project's capped stream (`mitm:requests:<project>`, about the last
 * STREAM_CAPS.mitmRequests). A page is read newest first by entry id with XREVRANGE, one entry
 * more than asked to know whether older ones remain, and continues before the entry id its
 * cursor names (an exclusive bound, so an entry is shown once however the stream moves: new
 * entries come in at the head, the cap drops them at the tail). The exit each capture names is
 * looked up in Postgres (its connector's name, its proxy's host and port, never its login), so
 * a reader needs no other call to tell exits apart.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import {
  type CapturedHeader,
  decodeMitmCapture,
  type MitmCapture,
} from "../../shared/mitm-captures.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { redisDeadline } from "../core/redis.ts";
import { isUuid } from "../core/store.ts";

/** A capture as the API answers it: the stream entry's id and the capture's fields. */
export interface MitmCaptureView {
  /** The stream entry's id: what a cursor names. */
  id: string;
  /** When the exchange ended (ISO 8601). */
  at: string;
  method: string;
  host: string;
  path: string;
  status: number;
  proxy_status: string;
  first_byte_ms: number | null;
  total_ms: number;
  connector_id: string | null;
  /** The connector's name; null when none served it or the connector is gone. */
  connector_name: string | null;
  proxy_id: string | null;
  /** The proxy's `host:port` (no login); null when none served it or the proxy is gone. */
  proxy_address: string | null;
  bytes_up: number;
  bytes_down: number;
  request_headers: CapturedHeader[];
  sent_headers: CapturedHeader[];
  response_headers: CapturedHeader[];
  ja3: string;
  ja4: string;
  sni: string;
  http2: string;
  mode: string;
}

export interface MitmCapturesPage {
  items: MitmCaptureView[];
  /** Pass as `cursor` for the next, older page; null at the end. */
  next_cursor: string | null;
}

export interface MitmCaptureStores {
  redis: Redis;
  keys: RedisKeys;
  database: Database;
  /** The Redis step's deadline (settings.redisRequestTimeoutMs). */
  deadlineMs: number;
}

/** The captures of a project, newest first: `count` of them, before `cursor` when given. */
export async function mitmCaptures(
  stores: MitmCaptureStores,
  projectId: string,
  page: { count: number; cursor?: string },
): Promise<MitmCapturesPage> {
  // Nothing comes before the first id there is (and Redis refuses an interval ending before it).
  if (page.cursor !== undefined && /^0+-0+$/.test(page.cursor)) {
    return { items: [], next_cursor: null };
  }
  const end = page.cursor === undefined ? "+" : `(${page.cursor}`;
  const entries = await redisDeadline(
    stores.deadlineMs,
    () =>
      stores.redis.xrevrange(
        stores.keys.mitmRequests(projectId),
        end,
        "-",
        "COUNT",
        page.count + 1,
      ),
  );
  const shown = entries.slice(0, page.count);
  const decoded: [string, MitmCapture][] = [];
  for (const [id, fields] of shown) {
    // An entry this release cannot read is passed over; the cursor still moves past it.
    const capture = decodeMitmCapture(fields);
    if (capture && Number.isFinite(new Date(capture.atMs).getTime())) {
      decoded.push([id, capture]);
    }
  }
  const exits = await exitsOf(stores.database, projectId, decoded.map(([, c]) => c));
  return {
    items: decoded.map(([id, capture]) => view(id, capture, exits)),
    next_cursor: entries.length > page.count ? shown[shown.length - 1][0] : null,
  };
}

/** Removes every capture of a project (the whole stream); gateways start a new one. */
export async function clearMitmCaptures(
  stores: MitmCaptureStores,
  projectId: string,
): Promise<void> {
  await redisDeadline(
    stores.deadlineMs,
    () => stores.redis.del(stores.keys.mitmRequests(projectId)),
  );
}

interface Exits {
  connectors: Map<string, string>;
  proxies: Map<string, string>;
}

/** The names of the connectors and the addresses of the proxies the captures name. */
async function exitsOf(
  database: Database,
  projectId: string,
  captures: readonly MitmCapture[],
): Promise<Exits> {
  const ids = (pick: (capture: MitmCapture) => string | null) => [
    ...new Set(captures.map(pick).filter((id): id is string => id !== null && isUuid(id))),
  ];
  const connectorIds = ids((capture) => capture.connectorId);
  const proxyIds = ids((capture) => capture.proxyId);
  const exits: Exits = { connectors: new Map(), proxies: new Map() };
  if (connectorIds.length === 0 && proxyIds.length === 0) return exits;
  try {
    const [connectors, proxies] = await Promise.all([
      database.sql<{ id: string; name: string }[]>`
        select id::text as id, name from connectors
        where project_id = ${projectId} and id = any(${connectorIds}::uuid[])`,
      database.sql<{ id: string; host: string; port: number }[]>`
        select id::text as id, host, port from proxies
        where project_id = ${projectId} and id = any(${proxyIds}::uuid[])`,
    ]);
    for (const row of connectors) exits.connectors.set(row.id, row.name);
    for (const row of proxies) {
      const host = row.host.includes(":") ? `[${row.host}]` : row.host;
      exits.proxies.set(row.id, `${host}:${row.port}`);
    }
  } catch (error) {
    throw translatePostgresError(error);
  }
  return exits;
}

/** A whole number of at least 0, as the answer declares its counts and times. */
function whole(value: number): number {
  return Number.isFinite(value) ? Math.max(0, Math.round(value)) : 0;
}

function view(id: string, capture: MitmCapture, exits: Exits): MitmCaptureView {
  const lower = (value: string | null) => value?.toLowerCase() ?? "";
  return {
    id,
    at: new Date(capture.atMs).toISOString(),
    method: capture.method,
    host: capture.host,
    path: capture.path,
    status: capture.status,
    proxy_status: capture.proxyStatus,
    first_byte_ms: capture.firstByteMs === null ? null : whole(capture.firstByteMs),
    total_ms: whole(capture.totalMs),
    connector_id: capture.connectorId,
    connector_name: exits.connectors.get(lower(capture.connectorId)) ?? null,
    proxy_id: capture.proxyId,
    proxy_address: exits.proxies.get(lower(capture.proxyId)) ?? null,
    bytes_up: whole(capture.bytesUp),
    bytes_down: whole(capture.bytesDown),
    request_headers: capture.requestHeaders,
    sent_headers: capture.sentHeaders,
    response_headers: capture.responseHeaders,
    ja3: capture.ja3,
    ja4: capture.ja4,
    sni: capture.sni,
    http2: capture.http2,
    mode: capture.mode,
  };
}
