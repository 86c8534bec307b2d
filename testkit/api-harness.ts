/**
 * An admin API over real stores for one test file: a fresh migrated database, a Redis prefix of
 * its own, the real ChangeLog and logger (lines captured), and one user of each role with a
 * token. Requests go through `app.request`, the same code path a server takes.
 */
import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import type { Hono } from "hono";
import { Redis } from "ioredis";
import { createDatabase, type Database } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { createApp } from "../control/api/app.ts";
import type { ApiDeps } from "../control/api/deps.ts";
import { ChangeLog } from "../control/core/changelog.ts";
import { JobQueue } from "../control/core/job-queue.ts";
import { ObservationRecorder } from "../control/geo/observation-recorder.ts";
import { createLogger } from "../control/core/logging.ts";
import { createRedis } from "../control/core/redis.ts";
import { createUser } from "../control/services/users.ts";
import { redisKeys } from "../shared/redis-keys.ts";
import { type UserRole } from "../shared/roles.ts";
import { ProviderRegistry } from "../shared/vendors/registry.ts";
import { type ControlSettings, parseControlSettings } from "../shared/settings.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
  testSecrets,
} from "./stores.ts";

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface Answer {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or the text when it is not JSON. */
  // deno-lint-ignore no-explicit-any -- tests read answer fields freely; a wrong field fails the assertion.
  body: any;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** A raw body, sent as is (text/plain unless headers say otherwise). */
  text?: string;
  /** Raw bytes, sent as is (application/octet-stream unless headers say otherwise). */
  bytes?: Uint8Array;
  headers?: Record<string, string>;
}

export interface ApiHarness {
  app: Hono;
  deps: ApiDeps;
  settings: ControlSettings;
  lines: LogLine[];
  /** A token per role, for users `admin`, `editor` and `viewer` (password `password-<role>`). */
  tokens: Record<UserRole, string>;
  userIds: Record<UserRole, string>;
  request(method: string, path: string, options?: RequestOptions): Promise<Answer>;
  /** Every change entry so far, oldest first. */
  changes(): Promise<{ kind: string; ref: string }[]>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /** Another Postgres (an outage test's private server); a fresh test database otherwise. */
  databaseUrl?: string;
  /** Another Redis (an outage test's private server); the test bed's otherwise. */
  redisUrl?: string;
  /** Skip creating the users of each role. */
  noUsers?: boolean;
  env?: Record<string, string>;
  /** The dashboard's build to serve (the checkout's dist/web otherwise). */
  webDir?: string;
}

export function captureLines(): { lines: LogLine[]; destination: Writable } {
  const lines: LogLine[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const text of chunk.toString("utf8").split("\n")) {
        if (text.trim() !== "") lines.push(JSON.parse(text) as LogLine);
      }
      callback();
    },
  });
  return { lines, destination };
}

export async function startHarness(options: HarnessOptions = {}): Promise<ApiHarness> {
  let testDatabase: TestDatabase | undefined;
  let databaseUrl = options.databaseUrl;
  if (databaseUrl === undefined) {
    testDatabase = await createTestDatabase();
    databaseUrl = testDatabase.url;
  }
  await migrate(databaseUrl);
  const redisUrl = options.redisUrl ?? TEST_REDIS_URL;
  const prefix = testPrefix();
  const secrets = testSecrets();
  const settings = parseControlSettings({
    OCTOPROX_DATABASE_URL: databaseUrl,
    OCTOPROX_REDIS_URL: redisUrl,
    OCTOPROX_REDIS_PREFIX: prefix,
    OCTOPROX_INTERNAL_SECRET: secrets.internal,
    OCTOPROX_JWT_SECRET: secrets.jwt,
    OCTOPROX_ADMIN_USERNAME: "admin",
    OCTOPROX_LOG_LEVEL: "debug",
    ...options.env,
  });
  const { lines, destination } = captureLines();
  const logger = createLogger({ level: "debug", instance: "test", role: "api", destination });
  const database: Database = createDatabase(databaseUrl, { poolSize: 5 });
  const redis = createRedis(redisUrl);
  const keys = redisKeys(prefix);
  const changes = new ChangeLog({
    redis,
    keys,
    logger,
    deadlineMs: settings.redisRequestTimeoutMs,
    retryDelayMs: 100,
    maxRetryDelayMs: 500,
  });
  const jobs = new JobQueue({ redis, keys, logger, deadlineMs: settings.redisRequestTimeoutMs });
  // As the node's: what routes record reaches the stream when the test publishes it or closes.
  const observations = new ObservationRecorder({
    redis,
    keys,
    logger,
    instance: "test",
    intervalMs: settings.geoObservationPublishIntervalMs,
    sendTimeoutMs: settings.redisRequestTimeoutMs,
  });
  const deps: ApiDeps = {
    settings,
    database,
    redis,
    keys,
    changes,
    jobs,
    logger,
    providers: new ProviderRegistry(),
    observations,
    process: {
      instance: "test",
      role: "api",
      version: "0.0.0-test",
      startedAt: new Date().toISOString(),
    },
    readiness: () => ({ ready: true, reasons: [] }),
    // No node here, so no snapshot to render: real processes' /metrics are in tests/node.
    metrics: () => Promise.resolve({ contentType: "text/plain", body: "" }),
    webDir: options.webDir,
  };
  const app = createApp(deps);

  async function request(
    method: string,
    path: string,
    opts: RequestOptions = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Uint8Array<ArrayBuffer> | undefined;
    if (opts.bytes !== undefined) {
      body = opts.bytes as Uint8Array<ArrayBuffer>;
      headers["content-type"] ??= "application/octet-stream";
    } else if (opts.text !== undefined) {
      body = opts.text;
      headers["content-type"] ??= "text/plain";
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await app.request(path, { method, headers, body });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: keep the text.
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  }

  const tokens = {} as Record<UserRole, string>;
  const userIds = {} as Record<UserRole, string>;
  if (!options.noUsers) {
    for (const role of ["admin", "editor", "viewer"] as const) {
      const user = await createUser(deps, { username: role, password: `password-${role}`, role });
      userIds[role] = user.id;
      const login = await request("POST", "/api/v1/auth/login", {
        body: { username: role, password: `password-${role}` },
      });
      if (login.status !== 200) throw new Error(`Login of ${role} failed: ${login.text}`);
      tokens[role] = login.body.access_token;
    }
  }

  // A client of its own for reading the stream: the app's may be pointed at a stopped server.
  const reader = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  reader.on("error", () => {});

  return {
    app,
    deps,
    settings,
    lines,
    tokens,
    userIds,
    request,
    async changes() {
      if (reader.status !== "ready") await reader.connect().catch(() => {});
      const entries = await reader.xrange(keys.changesStream, "-", "+");
      return entries.map(([, fields]) => {
        const record: Record<string, string> = {};
        for (let i = 0; i < fields.length; i += 2) record[fields[i]] = fields[i + 1];
        return { kind: record.kind, ref: record.ref };
      });
    },
    async close() {
      await observations.close();
      await changes.close();
      reader.disconnect();
      redis.disconnect();
      await database.close();
      await deletePrefix(redisUrl, prefix).catch(() => {});
      await testDatabase?.drop();
    },
  };
}

/**
 * An app on a real socket on a free loopback port, for clients that must send their request
 * line as written or see the socket's own address.
 */
export async function listen(app: Hono): Promise<{ port: number; close(): Promise<void> }> {
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
