/** Small feeds for the routing core's tests: every field filled with a plain default. */
import type {
  ConnectorSection,
  FeedConnector,
  FeedProject,
  FeedProxy,
  FeedSections,
  RuntimeSection,
} from "../../shared/feed/models.ts";
import type { Client } from "../../shared/routing/contract.ts";

export const PASSWORD = "s3cret-pass";

/** A stand-in for the codec's keyed digest: good enough to tell passwords apart. */
export const digestOf = (password: string) => `digest:${password}`;
export const verifyPassword = (password: string, digest: string) =>
  Promise.resolve(digestOf(password) === digest);

export function project(over: Partial<FeedProject> = {}): FeedProject {
  return {
    id: "p1",
    name: "Shop",
    username: "shop",
    password_digest: digestOf(PASSWORD),
    strategy: "round_robin",
    session_ttl_seconds: 300,
    sticky_quarantine: false,
    location_policy: "off",
    location_preflight: "off",
    connection_timeout_seconds: 30,
    max_retries: 3,
    traffic_quota: null,
    rate_limit: null,
    max_connections: null,
    allowed_cidrs: [],
    passwordless_cidrs: [],
    sequence: null,
    ...over,
  };
}

export function connector(id: string, over: Partial<FeedConnector> = {}): FeedConnector {
  return {
    id,
    project_id: "p1",
    name: id,
    kind: "static",
    provider: "static",
    enabled: true,
    pending_deletion: false,
    weight: 1,
    countries: [],
    domain_allow: [],
    domain_deny: [],
    rate_limit: null,
    traffic: null,
    ...over,
  };
}

export function proxy(id: string, over: Partial<FeedProxy> = {}): FeedProxy {
  return {
    id,
    scheme: "http",
    host: `${id}.upstream.test`,
    port: 3128,
    username: null,
    password: null,
    country: null,
    status: "healthy",
    max_concurrency: null,
    ...over,
  };
}

export function section(
  c: FeedConnector | string,
  proxies: readonly (FeedProxy | string)[],
): ConnectorSection {
  return {
    schema: 1,
    connector: typeof c === "string" ? connector(c) : c,
    proxies: proxies.map((p) => (typeof p === "string" ? proxy(p) : p)),
    config: null,
    credential: null,
  };
}

export const emptyRuntime = (): RuntimeSection => ({
  schema: 1,
  quarantines: [],
  traffic_blocks: [],
  project_blocks: [],
});

export function feed(
  sections: readonly ConnectorSection[],
  options: { projects?: FeedProject[]; runtime?: RuntimeSection } = {},
): FeedSections {
  return {
    global: {
      schema: 1,
      default_strategy: "round_robin",
      projects: options.projects ?? [project()],
      descriptors: [],
    },
    runtime: options.runtime ?? emptyRuntime(),
    connectors: new Map(sections.map((s) => [s.connector.id, s])),
  };
}

/** `user:password` as a Basic header. */
export const basic = (user: string, password = PASSWORD) => `Basic ${btoa(`${user}:${password}`)}`;

export const client = (
  options: Client["options"] = { user: "shop" },
  projectId = "p1",
): Client => ({
  projectId,
  options,
});

export const target = (host = "example.com", port = 443) => ({ host, port });
