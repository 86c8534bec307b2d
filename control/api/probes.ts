/**
 * The probes every control process answers, whatever its role: /health (the process is up and
 * says who it is), /live (the event loop turns), /ready (every reason not to serve, from the
 * last heartbeat and the runtimes) and /metrics (the telemetry, for Prometheus). The api role
 * mounts them beside the admin API; controller and worker processes serve them alone on the
 * same port.
 */
import { Hono } from "hono";
import type { MetricsText, ProcessInfo, Readiness } from "./deps.ts";

export interface ProbeDeps {
  process: ProcessInfo;
  readiness(): Readiness;
  metrics(): Promise<MetricsText>;
}

export function probeRoutes(deps: ProbeDeps): Hono {
  const app = new Hono();
  app.get("/health", (c) =>
    c.json({
      status: "healthy",
      instance: deps.process.instance,
      role: deps.process.role,
      version: deps.process.version,
      started_at: deps.process.startedAt,
    }));
  app.get("/live", (c) => c.json({ status: "alive" }));
  app.get("/ready", (c) => {
    const readiness = deps.readiness();
    return readiness.ready
      ? c.json({ status: "ready" })
      : c.json({ status: "not_ready", reasons: readiness.reasons }, 503);
  });
  app.get("/metrics", async (c) => {
    const { contentType, body } = await deps.metrics();
    return c.body(body, 200, { "content-type": contentType });
  });
  return app;
}
