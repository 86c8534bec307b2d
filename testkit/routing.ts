/**
 * What the gateway e2e files share on top of the cluster (testkit/cluster.ts): a project
 * set up through the API as an admin would, and waits on what clients see through gateways.
 */
import { randomBytes } from "node:crypto";
import type { Cluster, Gateway } from "./cluster.ts";
import {
  ClientConnection,
  type Credentials,
  exitOf,
  type ProxyAnswer,
  viaProxy,
} from "./clients/proxy-client.ts";

export interface RoutedProject {
  projectId: string;
  connectorId: string;
  /** Proxy ids, in the order of the URLs given. */
  proxyIds: string[];
  credentials: Credentials;
}

/**
 * A project with a proxy password of the test's choosing and one static connector holding
 * `upstreams` (proxy URLs), made through the API; waits until every proxy is healthy. Its
 * strategy is round_robin (named, not left to the install's default), which the waits here
 * rely on.
 */
export async function createRoutedProject(
  cluster: Cluster,
  upstreams: readonly string[],
  /**
   * More fields of the project and its connector, set when they are created, so the first feed
   * that routes the project carries them too.
   */
  fields: { project?: Record<string, unknown>; connector?: Record<string, unknown> } = {},
): Promise<RoutedProject> {
  const name = `gw${randomBytes(4).toString("hex")}`;
  const credentials = { username: name, password: `pw-${randomBytes(8).toString("hex")}` };
  const project = await cluster.request("POST", "/api/v1/projects", {
    name,
    username: credentials.username,
    password: credentials.password,
    strategy: "round_robin",
    ...fields.project,
  });
  if (project.status !== 201) throw new Error(`Project not created: ${JSON.stringify(project)}`);
  const connector = await cluster.request(
    "POST",
    `/api/v1/projects/${project.body.id}/connectors`,
    { name: "static", kind: "static", ...fields.connector },
  );
  if (connector.status !== 201) {
    throw new Error(`Connector not created: ${JSON.stringify(connector)}`);
  }
  const proxyIds: string[] = [];
  for (const url of upstreams) {
    const answer = await cluster.request("POST", `/api/v1/projects/${project.body.id}/proxies`, {
      connector_id: connector.body.id,
      url,
    });
    if (answer.status !== 201) throw new Error(`Proxy not added: ${JSON.stringify(answer)}`);
    proxyIds.push(answer.body.id);
  }
  const routed = {
    projectId: project.body.id as string,
    connectorId: connector.body.id as string,
    proxyIds,
    credentials,
  };
  await waitForStatuses(cluster, proxyIds, "healthy");
  return routed;
}

/** Waits until every proxy in `ids` has `status` in Postgres. */
export async function waitForStatuses(
  cluster: Cluster,
  ids: readonly string[],
  status: string,
  timeoutMs = 20_000,
): Promise<void> {
  await cluster.until(async () => {
    const statuses = await Promise.all(ids.map((id) => cluster.status(id)));
    return statuses.every((s) => s === status);
  }, { timeoutMs, message: `proxies ${ids.join(", ")} to be ${status}` });
}

/** `credentials` with username options appended (`-cc-de`…). */
export function withOptions(credentials: Credentials, options: string): Credentials {
  return { ...credentials, username: `${credentials.username}${options}` };
}

/**
 * `count` sequential GETs of `url` through the gateway on one keep-alive connection (so one
 * isolate and one round_robin cursor serve them all); answers each exit (the origin's /ip).
 */
export async function exitsThrough(
  gateway: Gateway,
  credentials: Credentials,
  url: string,
  count: number,
): Promise<string[]> {
  const connection = new ClientConnection();
  try {
    const exits: string[] = [];
    for (let i = 0; i < count; i++) {
      exits.push(exitOf(await viaProxy(gateway.proxyPort, credentials, url, { connection })));
    }
    if (connection.connections !== 1) {
      throw new Error(`The gateway did not keep the connection alive (${connection.connections})`);
    }
    return exits;
  } finally {
    connection.close();
  }
}

/**
 * Waits until each gateway routes the project through every one of `exits`: a round of
 * requests (round_robin visits each healthy proxy once per round) shows them all. A proxy is
 * healthy in Postgres a moment before the feed that says so reaches the gateways.
 */
export async function untilEveryExit(
  cluster: Cluster,
  gateways: readonly Gateway[],
  credentials: Credentials,
  url: string,
  exits: readonly string[],
): Promise<void> {
  for (const gateway of gateways) {
    await cluster.until(async () => {
      const seen = new Set(await exitsThrough(gateway, credentials, url, exits.length));
      return exits.every((exit) => seen.has(exit));
    }, { timeoutMs: 20_000, message: `${gateway.instance} to route through ${exits.join(", ")}` });
  }
}

/**
 * Waits until each gateway serves each of `places` (a username with its place's options, such as
 * `-cc-de`) through that place's one exit.
 */
export async function untilEachPlaceServed(
  cluster: Cluster,
  gateways: readonly Gateway[],
  url: string,
  places: readonly { name: string; credentials: Credentials; exit: string }[],
): Promise<void> {
  for (const gateway of gateways) {
    for (const place of places) {
      await untilAnswer(
        cluster,
        gateway,
        place.credentials,
        url,
        (answer) => answer.status === 200 && exitOf(answer) === place.exit,
        { message: `${gateway.instance} to serve ${place.name} through ${place.exit}` },
      );
    }
  }
}

/**
 * Waits until a GET of `url` through the gateway gives an answer `accept` takes, and answers
 * it. Each poll is `probes` real requests at once, each on a connection of its own (which a
 * gateway of several isolates spreads over them), and holds when every one is accepted.
 */
export async function untilAnswer(
  cluster: Cluster,
  gateway: Gateway,
  credentials: Credentials,
  url: string,
  accept: (answer: ProxyAnswer) => boolean,
  options: {
    timeoutMs?: number;
    intervalMs?: number;
    message?: string;
    probes?: number;
    /**
     * Each request's own deadline (5 s). A test that counts what the gateway served gives a
     * long one: a request given up on a loaded machine may still be served, and its retry then
     * counts twice.
     */
    requestTimeoutMs?: number;
  } = {},
): Promise<ProxyAnswer> {
  return await cluster.until(async () => {
    const answers = await Promise.all(
      Array.from(
        { length: options.probes ?? 1 },
        () =>
          viaProxy(gateway.proxyPort, credentials, url, {
            timeoutMs: options.requestTimeoutMs ?? 5_000,
          }),
      ),
    );
    return answers.every(accept) ? answers[0] : undefined;
  }, {
    timeoutMs: options.timeoutMs ?? 20_000,
    intervalMs: options.intervalMs ?? 10,
    message: options.message ?? `${gateway.instance} to answer as expected for ${url}`,
  });
}

/** The `error=` token of a gateway answer's Proxy-Status. */
export function proxyStatusError(value: string | string[] | undefined): string | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text ? /error=([a-z_]+)/.exec(text)?.[1] : undefined;
}

/**
 * Requests through gateways, sequentially per gateway, until stopped: for tests that must show
 * clients notice nothing while something else happens. Every answer other than the expected
 * one is kept.
 */
export class SteadyLoad {
  readonly ok = new Map<string, number>();
  readonly failures: string[] = [];
  #stopped = false;
  readonly #loops: Promise<void>[];

  constructor(
    gateways: readonly Gateway[],
    credentials: Credentials,
    url: string,
    accept: (answer: ProxyAnswer) => boolean = (answer) => answer.status === 200,
  ) {
    this.#loops = gateways.map(async (gateway) => {
      this.ok.set(gateway.instance, 0);
      while (!this.#stopped) {
        try {
          const answer = await viaProxy(gateway.proxyPort, credentials, url, { timeoutMs: 5_000 });
          if (accept(answer)) this.ok.set(gateway.instance, this.ok.get(gateway.instance)! + 1);
          else this.failures.push(`${gateway.instance}: ${answer.status} ${answer.body.trim()}`);
        } catch (error) {
          this.failures.push(`${gateway.instance}: ${(error as Error).message}`);
        }
        // A short pause between requests: a steady trickle, not a flood.
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });
  }

  /** Requests answered as expected by the gateway with the fewest so far. */
  get leastOk(): number {
    return Math.min(...this.ok.values());
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }
}

/** A port the gateway logged when it bound it (e.g. "SOCKS5 listener bound"). */
export function loggedPort(gateway: Gateway, message: string): number {
  const port = gateway.logs().find((line) => line.msg === message)?.port;
  if (typeof port !== "number") throw new Error(`${gateway.instance} did not log "${message}"`);
  return port;
}
