/**
 * One run of the dynamic-session rendering figures, printed as one JSON line: a vendor
 * username rendered per request (a client session hashed with the project id, its country), and
 * a whole acquire through a dynamic-sessions connector against one through a static one. The
 * `providers` suite runs it under Deno, the gateway's runtime:
 *
 *   DENO_NO_UPDATE_CHECK=1 npx deno run scripts/bench/render-entry.ts
 */
import { CoreRouter } from "../../shared/routing/router.ts";
import type { ConnectorSection, FeedSections } from "../../shared/feed/models.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";

const ITERATIONS = 200_000;
const SESSIONS = 1000;

function provider() {
  const built = new ProviderRegistry().descriptorProvider(
    { provider: "oxylabs", config: { session_mode: "dynamic" } },
    { username: "acme", password: "s3cret" },
  );
  if (!built.ok) throw new Error(built.message);
  return built.provider;
}

function perOpUs(work: (i: number) => void): number {
  for (let i = 0; i < 20_000; i++) work(i);
  const started = performance.now();
  for (let i = 0; i < ITERATIONS; i++) work(i);
  return ((performance.now() - started) * 1000) / ITERATIONS;
}

function section(kind: "static" | "vendor"): ConnectorSection {
  return {
    schema: 1,
    connector: {
      id: kind,
      project_id: "p1",
      name: kind,
      kind,
      provider: kind === "vendor" ? "oxylabs" : "static",
      enabled: true,
      pending_deletion: false,
      weight: 1,
      countries: ["DE", "US"],
      domain_allow: [],
      domain_deny: [],
      rate_limit: null,
      traffic: null,
    },
    proxies: [{
      id: `${kind}-row`,
      scheme: "http",
      host: "pr.oxylabs.io",
      port: 7777,
      username: "customer-acme",
      password: "s3cret",
      country: kind === "static" ? "DE" : null,
      status: "healthy",
      max_concurrency: null,
    }],
    config: kind === "vendor" ? { session_mode: "dynamic" } : null,
    credential: kind === "vendor" ? { username: "acme", password: "s3cret" } : null,
  };
}

function acquireUs(kind: "static" | "vendor"): number {
  const router = new CoreRouter({ verifyPassword: () => Promise.resolve(true) });
  const feed: FeedSections = {
    global: {
      schema: 1,
      default_strategy: "round_robin",
      projects: [{
        id: "p1",
        name: "p",
        username: "p",
        password_digest: "x",
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
      }],
      descriptors: [],
    },
    runtime: { schema: 1, quarantines: [], traffic_blocks: [], project_blocks: [] },
    connectors: new Map([[kind, section(kind)]]),
  };
  router.apply(feed);
  const clients = Array.from({ length: SESSIONS }, (_, i) => ({
    projectId: "p1",
    options: { user: "p", country: "DE", sessionId: `client-${i}` },
  }));
  const target = { host: "example.com", port: 443 };
  return perOpUs((i) => {
    const answer = router.acquire(clients[i % SESSIONS], target);
    if (answer instanceof Promise || !("release" in answer)) throw new Error("refused");
    answer.release({ ok: true });
  });
}

const p = provider();
const sessions = Array.from({ length: SESSIONS }, (_, i) => `client-${i}`);
const renderUs = perOpUs((i) => {
  p.renderRequest("p1", { country: "DE", sessionId: sessions[i % SESSIONS], sessionMinutes: 20 });
});
console.log(JSON.stringify({
  renderUs,
  acquireDynamicUs: acquireUs("vendor"),
  acquireStaticUs: acquireUs("static"),
}));
