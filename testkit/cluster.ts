/**
 * A cluster of real control processes for one e2e test file: its own database (each process
 * migrates it at start, through the migration lock), its own Redis key prefix, one set of
 * secrets, and fast test settings. Tests drive the api over HTTP as an admin would and read
 * Postgres and Redis through connections of their own.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { Redis } from "ioredis";
import { redisKeys, WORKERS_GROUP } from "../shared/redis-keys.ts";
import type { JobKind } from "../shared/roles.ts";
import { deriveFeedKeys, type FeedKeys } from "../shared/feed/codec.ts";
import { DENO_BIN, DENO_ENV, gatewayRunArgs } from "../scripts/gateway-command.ts";
import { freePort } from "./ports.ts";
import {
  type ControlProcess,
  killAll,
  spawnCommand,
  type Spawned,
  startControl,
  waitWhileRunning,
} from "./processes.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_ADMIN_DATABASE_URL,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
  testSecrets,
} from "./stores.ts";
import { type WaitOptions, waitUntil } from "./wait.ts";
import { seriesValue } from "./promtool.ts";
import { describeFindings, SecretsScan } from "./secrets-scan.ts";
import { testMitmCa, testMitmCaEnv } from "./mitm-ca.ts";

/**
 * Production loops, faster: checks every second that give up after 2 s, a lease that a standby
 * takes within 0.2 s of its release and 3 s of its holder's death, claims after 1.5 s.
 */
export const FAST_SETTINGS: Readonly<Record<string, string>> = {
  OCTOPROX_HEARTBEAT_INTERVAL: "0.2",
  OCTOPROX_HEALTH_CHECK_INTERVAL: "1",
  OCTOPROX_HEALTH_CHECK_TIMEOUT: "2",
  OCTOPROX_HEALTH_CHECK_CONCURRENCY: "20",
  OCTOPROX_CONTROLLER_LEASE_TTL: "3",
  OCTOPROX_CONTROLLER_LEASE_REFRESH: "0.2",
  OCTOPROX_CONTROLLER_LEASE_POLL: "0.2",
  OCTOPROX_CLAIM_TIMEOUT: "1.5",
  OCTOPROX_RECLAIM_INTERVAL: "0.3",
  OCTOPROX_FEED_COMPILE_INTERVAL: "0.1",
  OCTOPROX_INDEX_HYGIENE_INTERVAL: "1",
  OCTOPROX_STOP_GRACE: "1",
  OCTOPROX_LOG_LEVEL: "info",
};

export const ADMIN_USERNAME = "admin";

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

/** A control process of the cluster, with what the test needs to reach and judge it. */
export interface Member extends ControlProcess {
  role: string;
  instance: string;
  /** The JSON log lines so far. */
  logs(): LogLine[];
  /** Stops it; the cluster no longer counts its exit as a failure. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): ReturnType<ControlProcess["stop"]>;
}

export interface ApiAnswer {
  status: number;
  // deno-lint-ignore no-explicit-any -- tests read answer fields freely; a wrong one fails.
  body: any;
}

export interface ProxyRow {
  status: string;
  status_changed_at: Date;
}

export interface ClusterOptions {
  /** Another Redis (a private server a test may wipe or stop); the test bed's otherwise. */
  redisUrl?: string;
  /**
   * Another Postgres server (its admin URL) to make the cluster's database on: a private one a
   * test may stop. The test bed's otherwise.
   */
  databaseAdminUrl?: string;
  /** Settings every process of the cluster gets, over FAST_SETTINGS. */
  env?: Record<string, string>;
  /** Leave FAST_SETTINGS out: every setting at its default but `env`, as an install runs. */
  defaults?: boolean;
}

/** A gateway of the cluster: gateway/main.ts under Deno, as `npm start` runs it. */
export interface Gateway extends Member {
  /** The proxy listener's port; throws while it is not bound (before the first feed). */
  readonly proxyPort: number;
  /** `http://<username>:<password>@127.0.0.1:<proxy port>`, for `curl -x`. */
  proxyUrl(username: string, password: string): string;
  /** One series' value from /metrics (labels included in `series`); 0 when absent. */
  metric(series: string): Promise<number>;
}

export interface GatewayOptions {
  instance?: string;
  /**
   * OCTOPROX_DESTINATION_ALLOW_CIDRS: 127.0.0.0/8 unless told (the test bed's origins are on
   * loopback); null starts the gateway without an allow list.
   */
  allowCidrs?: string | null;
  /** The proxy port; 0 (any free port, read from the log once bound) unless told. */
  proxyPort?: number;
  /** Settings for this gateway alone. */
  env?: Record<string, string>;
  /** Wait for /ready (the first feed applied, the proxy port bound); default true. */
  ready?: boolean;
  /**
   * The program and its arguments: `deno run` of gateway/main.ts (gatewayRunArgs) unless told,
   * such as the single-file bundle (gatewayBundleRunArgs, given `gatewayEnv`'s CA settings).
   */
  command?: readonly [string, ...string[]];
}

export class Cluster {
  readonly prefix = testPrefix();
  readonly keys = redisKeys(this.prefix);
  readonly redisUrl: string;
  /** The test's own Redis connection. */
  readonly redis: Redis;
  readonly members: Member[] = [];
  readonly #database: TestDatabase;
  readonly #privateDatabase: boolean;
  readonly #sql: postgres.Sql;
  readonly #env: Record<string, string>;
  readonly #secrets = testSecrets();
  readonly #adminPassword = `pw-${randomBytes(8).toString("hex")}`;
  readonly #stopped = new Set<Member>();
  /** What must never be in clear in logs, error answers, metrics or Redis (checked at close). */
  readonly secretsScan = new SecretsScan();
  #scanned = false;
  #token: string | undefined;
  #api: Member | undefined;

  private constructor(database: TestDatabase, options: ClusterOptions) {
    this.#database = database;
    this.#privateDatabase = options.databaseAdminUrl !== undefined;
    this.redisUrl = options.redisUrl ?? TEST_REDIS_URL;
    this.redis = new Redis(this.redisUrl, { maxRetriesPerRequest: 1 });
    // A private Redis a test stops must not crash the test process with an unhandled error.
    this.redis.on("error", () => {});
    this.#sql = postgres(database.url, { max: 2, onnotice: () => {} });
    this.#env = { ...(options.defaults ? {} : FAST_SETTINGS), ...options.env };
    this.secretsScan.add("OCTOPROX_INTERNAL_SECRET", this.#secrets.internal);
    this.secretsScan.add("OCTOPROX_JWT_SECRET", this.#secrets.jwt);
    this.secretsScan.addPair("OCTOPROX_ADMIN_PASSWORD", ADMIN_USERNAME, this.#adminPassword);
    this.secretsScan.addUrls("OCTOPROX_REDIS_URL", this.redisUrl);
    this.secretsScan.addUrls("OCTOPROX_DATABASE_URL", database.url);
    // The gateways' CA key is in its file and nowhere else: no log, answer, Redis key, feed
    // section or database row.
    this.secretsScan.addFileOnly(
      "the TLS interception CA's key (OCTOPROX_TLS_MITM_CA_KEY_PATH)",
      testMitmCa().keyPem,
    );
  }

  static async create(options: ClusterOptions = {}): Promise<Cluster> {
    return new Cluster(
      await createTestDatabase(options.databaseAdminUrl ?? TEST_ADMIN_DATABASE_URL),
      options,
    );
  }

  /**
   * Until every gateway of `gateways` has sent Redis what it metered (no row waiting for its
   * next batch): what a metrics flush run after this takes is all the traffic so far.
   */
  async untilMetered(gateways: readonly Gateway[]): Promise<void> {
    await this.until(async () => {
      const pending = await Promise.all(
        gateways.map((gateway) => gateway.metric("octoprox_gateway_metering_pending_rows")),
      );
      return pending.every((rows) => rows === 0);
    }, { message: "the gateways' metering sent" });
  }

  /** The first admin's login, as a person signs in to the dashboard. */
  get adminLogin(): { username: string; password: string } {
    return { username: ADMIN_USERNAME, password: this.#adminPassword };
  }

  /** The api process (the first started with role api or all). */
  get api(): Member {
    if (!this.#api) throw new Error("The cluster has no api process");
    return this.#api;
  }

  /**
   * Starts a process of `role` and waits until it is ready. `env` adds to the cluster's
   * settings for this process alone.
   */
  async start(
    role: string,
    options: { instance?: string; env?: Record<string, string>; ready?: boolean } = {},
  ): Promise<Member> {
    const instance = options.instance ??
      `e2e-${role}-${randomBytes(3).toString("hex")}`;
    const port = await freePort();
    // Every proxy of the test bed runs on this machine, so health checks may ask the api's
    // /echo on loopback: said here, since a real install's default is no loopback address.
    const apiUrl = role === "api" || role === "all" ? `http://127.0.0.1:${port}` : this.#api?.url;
    const control = await startControl({
      databaseUrl: this.#database.url,
      redisUrl: this.redisUrl,
      prefix: this.prefix,
      role,
      instance,
      port,
      extra: {
        OCTOPROX_INTERNAL_SECRET: this.#secrets.internal,
        OCTOPROX_JWT_SECRET: this.#secrets.jwt,
        OCTOPROX_ADMIN_USERNAME: ADMIN_USERNAME,
        OCTOPROX_ADMIN_PASSWORD: this.#adminPassword,
        // The certificate the gateways sign with, which the api answers (never the key).
        OCTOPROX_TLS_MITM_CA_CERT_PATH: testMitmCa().certPath,
        ...(apiUrl === undefined ? {} : { OCTOPROX_PUBLIC_URL: apiUrl }),
        ...this.#env,
        ...options.env,
      },
    });
    const member = this.#member(control, role, instance);
    if ((role === "api" || role === "all") && !this.#api) this.#api = member;
    if (options.ready !== false) await this.waitForReady(member);
    return member;
  }

  /** Counts a process in the cluster: its exit fails `until`, `close` stops it. */
  #member(control: ControlProcess, role: string, instance: string): Member {
    const stop = control.stop;
    const member: Member = {
      ...control,
      role,
      instance,
      logs: () => parseLogs(control.stdout),
      stop: (signal, timeoutMs) => {
        this.#stopped.add(member);
        return stop(signal, timeoutMs);
      },
    };
    this.members.push(member);
    return member;
  }

  /**
   * The environment a gateway of this cluster runs with (its Redis, prefix and internal secret,
   * the test process's TLS interception CA, the api's URL for IP database files and its /echo
   * for preflight, both listeners on 127.0.0.1, every port 0), for a test that runs one itself:
   * one expected to exit, say. Give gatewayRunArgs the same environment, so it may read the CA.
   */
  gatewayEnv(instance: string, options: GatewayOptions = {}): Record<string, string> {
    const allowCidrs = options.allowCidrs === undefined ? "127.0.0.0/8" : options.allowCidrs;
    return {
      ...DENO_ENV,
      OCTOPROX_REDIS_URL: this.redisUrl,
      OCTOPROX_REDIS_PREFIX: this.prefix,
      OCTOPROX_INTERNAL_SECRET: this.#secrets.internal,
      ...testMitmCaEnv(),
      OCTOPROX_INSTANCE_ID: instance,
      OCTOPROX_GATEWAY_HOST: "127.0.0.1",
      OCTOPROX_PROXY_PORT: String(options.proxyPort ?? 0),
      // Port 0: each listener takes a free port and logs it, so no two gateways collide.
      OCTOPROX_GATEWAY_STATUS_PORT: "0",
      OCTOPROX_SOCKS_PORT: "0",
      OCTOPROX_CONNECT_TIMEOUT: "5",
      OCTOPROX_LOG_LEVEL: "info",
      ...(allowCidrs === null ? {} : { OCTOPROX_DESTINATION_ALLOW_CIDRS: allowCidrs }),
      // IP database files come from the api's internal endpoint, as on an install.
      ...(this.#api === undefined ? {} : { OCTOPROX_GATEWAY_GEO_URL: this.#api.url }),
      // Preflight echoes through proxies to the api's /echo, as on an install.
      ...(this.#api === undefined ? {} : { OCTOPROX_GATEWAY_ECHO_URL: `${this.#api.url}/echo` }),
      ...options.env,
    };
  }

  /**
   * Starts a gateway on this cluster's Redis, prefix and internal secret, with the command
   * `npm start` uses (scripts/gateway-command.ts), both listeners on 127.0.0.1. Answers once
   * its status listener is up, and by default once it is ready.
   */
  async startGateway(options: GatewayOptions = {}): Promise<Gateway> {
    const instance = options.instance ?? `e2e-gateway-${randomBytes(3).toString("hex")}`;
    const env = this.gatewayEnv(instance, options);
    const [program, ...args] = options.command ?? [DENO_BIN, ...gatewayRunArgs(env)];
    const spawned: Spawned = spawnCommand(program, args, env);
    const bound = (message: string) =>
      parseLogs(spawned.stdout).find((line) => line.msg === message)?.port as
        | number
        | undefined;
    const statusPort = await waitWhileRunning(spawned, () => bound("Status listener bound"), {
      timeoutMs: 30_000,
      intervalMs: 20,
      message: `${instance}'s status listener`,
    });
    const url = `http://127.0.0.1:${statusPort}`;
    const member = this.#member({ ...spawned, port: statusPort, url }, "gateway", instance);
    const proxyPort = (): number => {
      const port = options.proxyPort || bound("Proxy listener bound");
      if (!port) throw new Error(`${instance} has not bound its proxy port yet`);
      return port;
    };
    const extra = {
      proxyUrl: (username: string, password: string): string =>
        `http://${encodeURIComponent(username)}:${
          encodeURIComponent(password)
        }@127.0.0.1:${proxyPort()}`,
      async metric(series: string): Promise<number> {
        const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) });
        return seriesValue(await response.text(), series) ?? 0;
      },
    };
    const gateway = Object.defineProperty(Object.assign(member, extra), "proxyPort", {
      get: proxyPort,
      enumerable: true,
    }) as Gateway;
    if (options.ready !== false) {
      await this.waitForReady(gateway);
      // Logged just before /ready can answer 200; read back so `proxyPort` holds from here.
      await this.until(() => bound("Proxy listener bound"), {
        message: `${instance}'s proxy listener`,
      });
    }
    return gateway;
  }

  /** The feed's keys under this cluster's internal secret (a test forging a feed needs them). */
  feedKeys(): Promise<FeedKeys> {
    return deriveFeedKeys(this.#secrets.internal);
  }

  async waitForReady(member: Member, timeoutMs = 30_000): Promise<void> {
    await this.until(async () => {
      try {
        const response = await fetch(`${member.url}/ready`, { signal: AbortSignal.timeout(2000) });
        await response.body?.cancel();
        return response.status === 200;
      } catch {
        return false;
      }
    }, { timeoutMs, intervalMs: 50, message: `${member.instance} to be ready` });
  }

  /**
   * Waits for a condition with a deadline; fails at once, with its output, when a process the
   * test did not stop exits meanwhile.
   */
  async until<T>(
    check: () => T | Promise<T>,
    options: WaitOptions = {},
  ): Promise<NonNullable<T>> {
    let cancelled = false;
    const died = new Promise<never>((_, reject) => {
      for (const member of this.members.filter((m) => !this.#stopped.has(m))) {
        void member.exited.then((exit) => {
          if (cancelled || this.#stopped.has(member)) return;
          reject(
            new Error(
              `${member.instance} exited (${exit.code ?? exit.signal}) before ${
                options.message ?? "the condition"
              }:\n${member.stderr.join("\n")}\n${member.stdout.slice(-30).join("\n")}`,
            ),
          );
        });
      }
    });
    try {
      return await Promise.race([waitUntil(check, { intervalMs: 25, ...options }), died]);
    } finally {
      cancelled = true;
    }
  }

  /**
   * Runs a job kind now, as its producer's slot would, and waits until a worker handled it (the
   * entry is deleted once the job returned).
   */
  async runNow(kind: JobKind): Promise<void> {
    const stream = this.keys.jobStream(kind);
    await this.redis.xadd(stream, "*", "key", "all");
    await this.until(async () => (await this.redis.xlen(stream)) === 0, {
      message: `the ${kind} job to run`,
    });
  }

  /** Waits until `member` logs a line whose message is `msg`; answers that line. */
  logged(member: Member, msg: string, options: { timeoutMs?: number } = {}): Promise<LogLine> {
    return this.until(() => member.logs().find((line) => line.msg === msg), {
      ...options,
      message: `${member.instance} to log "${msg}"`,
    });
  }

  // -------------------------------------------------------------------------------------------
  // The admin API, as a user drives it.

  async request(method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    return await this.#fetch(method, path, body, await this.token());
  }

  /** The admin's bearer token (signed in once), for a request `request` cannot make. */
  async token(): Promise<string> {
    this.#token ??= await this.#login();
    return this.#token;
  }

  async #login(): Promise<string> {
    const answer = await this.#fetch("POST", "/api/v1/auth/login", {
      username: ADMIN_USERNAME,
      password: this.#adminPassword,
    });
    if (answer.status !== 200) throw new Error(`Admin login failed: ${JSON.stringify(answer)}`);
    return answer.body.access_token as string;
  }

  async #fetch(method: string, path: string, body: unknown, token?: string): Promise<ApiAnswer> {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    this.secretsScan.noteRequest(method, path, body);
    const response = await fetch(`${this.api.url}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: keep the text.
    }
    this.secretsScan.noteAnswer(method, path, response.status, text, parsed);
    return { status: response.status, body: parsed };
  }

  /** A project with one static connector; `checkUrl` is the connector's healthcheck_url. */
  async createConnector(
    checkUrl: string | null = null,
  ): Promise<{ projectId: string; connectorId: string }> {
    const name = `p${randomBytes(4).toString("hex")}`;
    const project = await this.request("POST", "/api/v1/projects", { name, username: name });
    if (project.status !== 201) throw new Error(`Project not created: ${JSON.stringify(project)}`);
    const connector = await this.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      name: "static",
      kind: "static",
      healthcheck_url: checkUrl,
    });
    if (connector.status !== 201) {
      throw new Error(`Connector not created: ${JSON.stringify(connector)}`);
    }
    return { projectId: project.body.id, connectorId: connector.body.id };
  }

  /** Adds a proxy through the API; answers its id. */
  async addProxy(connector: { projectId: string; connectorId: string }, url: string) {
    const answer = await this.request("POST", `/api/v1/projects/${connector.projectId}/proxies`, {
      connector_id: connector.connectorId,
      url,
    });
    if (answer.status !== 201) throw new Error(`Proxy not added: ${JSON.stringify(answer)}`);
    return answer.body.id as string;
  }

  // -------------------------------------------------------------------------------------------
  // The stores, read directly.

  /** The cluster's database, through the test's own connection. */
  get sql(): postgres.Sql {
    return this.#sql;
  }

  /** The api's address (the first api or all process started). */
  get apiUrl(): string {
    if (this.#api === undefined) throw new Error("The cluster has no api yet");
    return this.#api.url;
  }

  /** The cluster's database URL, for a test that calls a service against it. */
  get databaseUrl(): string {
    return this.#database.url;
  }

  async proxyRow(id: string): Promise<ProxyRow> {
    const [row] = await this.#sql<ProxyRow[]>`
      select status, status_changed_at from proxies where id = ${id}`;
    if (!row) throw new Error(`No proxy ${id}`);
    return row;
  }

  async status(id: string): Promise<string> {
    return (await this.proxyRow(id)).status;
  }

  /** The proxy's soft health, or undefined when it has none. */
  async softHealth(id: string): Promise<Record<string, string> | undefined> {
    const hash = await this.redis.hgetall(this.keys.proxyHealth(id));
    return Object.keys(hash).length === 0 ? undefined : hash;
  }

  /** Change entries after `afterId` (`-` for all). */
  async changes(afterId = "-"): Promise<{ id: string; kind: string; ref: string }[]> {
    const start = afterId === "-" ? "-" : `(${afterId}`;
    const entries = await this.redis.xrange(this.keys.changesStream, start, "+");
    return entries.map(([id, fields]) => {
      const record: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i]] = fields[i + 1];
      return { id, kind: record.kind, ref: record.ref };
    });
  }

  /**
   * Waits until every committed write's change entry is in the change stream: its outbox row is
   * deleted only once announced, so an empty outbox means nothing committed is still on its way.
   */
  async untilAnnounced(): Promise<void> {
    await this.until(
      async () => (await this.#sql`select 1 from change_outbox limit 1`).length === 0,
      {
        message: "every committed change announced",
      },
    );
  }

  /** The newest change entry's id, `0-0` when there is none. */
  async lastChangeId(): Promise<string> {
    const [last] = await this.redis.xrevrange(this.keys.changesStream, "+", "-", "COUNT", 1);
    return last?.[0] ?? "0-0";
  }

  /** How many entries a stream was ever given (Redis 7's XINFO STREAM entries-added). */
  async entriesAdded(stream: string): Promise<number> {
    try {
      const info = (await this.redis.xinfo("STREAM", stream)) as unknown[];
      const index = info.indexOf("entries-added");
      return Number(info[index + 1]);
    } catch {
      return 0; // no stream yet
    }
  }

  /** A stream's pending entries: [id, consumer, idle ms, deliveries]. */
  async pending(stream: string): Promise<{ id: string; consumer: string; deliveries: number }[]> {
    try {
      const rows = (await this.redis.xpending(stream, WORKERS_GROUP, "-", "+", 100)) as [
        string,
        string,
        number,
        number,
      ][];
      return rows.map(([id, consumer, , deliveries]) => ({ id, consumer, deliveries }));
    } catch {
      return [];
    }
  }

  /** A process's last heartbeat snapshot, from Redis. */
  async snapshot(member: Member): Promise<Record<string, unknown> | undefined> {
    const text = await this.redis.get(this.keys.instanceSnapshot(member.instance));
    return text === null ? undefined : JSON.parse(text) as Record<string, unknown>;
  }

  /** The Redis stream consumer a worker reads its jobs as, from its heartbeat. */
  async consumerOf(member: Member): Promise<string> {
    const snapshot = await this.until(() => this.snapshot(member), {
      message: `${member.instance}'s heartbeat`,
    });
    const runtimes = snapshot.runtimes as Record<string, { consumer?: string }>;
    const consumer = runtimes.worker?.consumer;
    if (!consumer) throw new Error(`No consumer in ${member.instance}'s snapshot`);
    return consumer;
  }

  /** Entries a worker's health runners took over from dead consumers, from its heartbeat. */
  async reclaimedBy(member: Member): Promise<number> {
    const snapshot = await this.snapshot(member);
    const loops = (snapshot?.loops ?? []) as Record<string, unknown>[];
    // The health kind's runners: its regular stream's and its first lane's.
    return loops.filter((loop) =>
      loop.name === "job_runner_health" || loop.name === "job_runner_health_first"
    ).reduce((sum, loop) => sum + Number(loop.reclaimed ?? 0), 0);
  }

  /** The holder id in the lease key, or null. */
  leaseHolder(): Promise<string | null> {
    return this.redis.get(this.keys.controllerLease);
  }

  /** Prints each process's last output: called when a test failed. */
  dump(): void {
    for (const member of this.members) {
      console.error(
        `--- ${member.instance} (${member.role}) stderr:\n${member.stderr.slice(-20).join("\n")}` +
          `\n--- stdout:\n${member.stdout.slice(-60).join("\n")}`,
      );
    }
  }

  /**
   * Stops every process (SIGKILL for any a test left), then drops the database and keys. Fails
   * (once everything is cleaned up) when the secrets scan found a known secret in clear.
   */
  async close(): Promise<void> {
    const scan = !this.#scanned;
    this.#scanned = true;
    if (scan) await this.secretsScan.readMetrics(this.members);
    await Promise.all(
      this.members.filter((m) => m.alive()).map((m) => m.stop("SIGTERM", 5_000)),
    );
    await killAll();
    const findings = scan
      ? await this.secretsScan.scan({
        members: this.members,
        redis: this.redis,
        prefix: this.prefix,
        feed: await this.feedKeys(),
        database: this.#sql,
      })
      : [];
    this.redis.disconnect();
    await this.#sql.end({ timeout: 2 });
    await deletePrefix(this.redisUrl, this.prefix).catch(() => {});
    // A private server goes with its folder: a test that failed may have left it stopped.
    if (this.#privateDatabase) await this.#database.drop().catch(() => {});
    else await this.#database.drop();
    if (findings.length > 0) throw new Error(describeFindings(findings));
  }
}

function parseLogs(stdout: readonly string[]): LogLine[] {
  const lines: LogLine[] = [];
  for (const text of stdout) {
    if (!text.startsWith("{")) continue;
    try {
      lines.push(JSON.parse(text) as LogLine);
    } catch {
      // A partial line: skipped.
    }
  }
  return lines;
}
