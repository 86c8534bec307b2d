/**
 * The controller's parts: the lease, which every controller reports, and the feed builder's
 * and the job producers', which only the leading controller reports, so a sum over every
 * controller counts each publish once. A standby's leader-only families have no samples.
 */
import type { Registry } from "prom-client";
import type { FeedBuilderSnapshot } from "../../feed/builder.ts";
import type { JobProducerSnapshot } from "../../jobs/producers.ts";
import type { LeaseSnapshot } from "../../core/lease.ts";
import { flag, type Sample, type Scrape, seconds, TelemetryPart } from "./family.ts";
import { isFeedBuilder, isJobProducer, leads, leaseOf } from "./rows.ts";
import { PROXY_STATUSES } from "../../../shared/roles.ts";

function fromLease(
  scrape: Scrape,
  value: (lease: LeaseSnapshot) => number,
): Sample<never>[] {
  const lease = leaseOf(scrape.snapshot);
  return lease === undefined ? [] : [[{}, value(lease)]];
}

export class LeaseTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.gauge({
      name: "octoprox_controller_lease_held",
      help: "1 while this controller leads (holds the lease and its cover has not run out).",
      samples: (scrape) => fromLease(scrape, (lease) => flag(lease.state === "leading")),
    });
    this.gauge({
      name: "octoprox_controller_lease_reachable",
      help: "1 when the lease keeper's last call reached Redis, else 0.",
      samples: (scrape) => fromLease(scrape, (lease) => flag(lease.error === null)),
    });
    this.counter({
      name: "octoprox_controller_lease_terms_total",
      help: "Terms this controller has led, counting the current one.",
      samples: (scrape) => fromLease(scrape, (lease) => lease.term),
    });
    this.counter({
      name: "octoprox_controller_lease_lapses_total",
      help: "Leads that ended because no refresh worked within the lease's time to live.",
      samples: (scrape) => fromLease(scrape, (lease) => lease.lapses),
    });
    this.counter({
      name: "octoprox_controller_lease_losses_total",
      help: "Leads ended by finding the lease key gone or another controller's.",
      samples: (scrape) => fromLease(scrape, (lease) => lease.losses),
    });
  }
}

/** The leader's feed builder; none on a standby. */
function leadingBuilder(scrape: Scrape): FeedBuilderSnapshot | undefined {
  if (!leads(scrape.snapshot)) return undefined;
  return scrape.snapshot.loops.find(isFeedBuilder);
}

function fromBuilder(
  scrape: Scrape,
  value: (builder: FeedBuilderSnapshot) => number | null,
): Sample<never>[] {
  const builder = leadingBuilder(scrape);
  const measured = builder === undefined ? null : value(builder);
  return measured === null ? [] : [[{}, measured]];
}

/** Each limited connector's or project's block as the leader last published it: 1 or 0. */
function trafficSamples<Label extends "connector" | "project">(
  scrape: Scrape,
  label: Label,
): Sample<Label>[] {
  const traffic = leadingBuilder(scrape)?.traffic;
  if (!traffic) return [];
  const limited = label === "connector" ? traffic.limited_connectors : traffic.limited_projects;
  const blocks = label === "connector" ? traffic.connector_blocks : traffic.project_blocks;
  return limited.map((id) => {
    const until = blocks[id];
    const labels = { [label]: id } as Record<Label, string>;
    return [labels, flag(until !== undefined && scrape.nowMs < until)];
  });
}

/** Cloud instances by cloud and state, every state of each cloud that has a connector. */
function cloudInstanceSamples(scrape: Scrape): Sample<"cloud" | "state">[] {
  const counts = leadingBuilder(scrape)?.cloud_instances;
  if (!counts) return [];
  return Object.entries(counts).flatMap(([cloud, byState]) =>
    PROXY_STATUSES.map((state) =>
      [{ cloud, state }, byState[state] ?? 0] as Sample<"cloud" | "state">
    )
  );
}

export class FeedTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.gauge({
      name: "octoprox_cloud_instances",
      help: "Cloud instances (rows of cloud connectors) by cloud and state, as the last compile " +
        "read them; clouds with a connector only (leading controller only).",
      labelNames: ["cloud", "state"],
      samples: cloudInstanceSamples,
    });
    this.counter({
      name: "octoprox_feed_compiles_total",
      help: "Compiles of the routing feed from Postgres (leading controller only).",
      samples: (scrape) => fromBuilder(scrape, (b) => b.compiles),
    });
    this.counter({
      name: "octoprox_feed_publishes_total",
      help: "Feed publishes that worked, whether they wrote anything or not " +
        "(leading controller only).",
      samples: (scrape) => fromBuilder(scrape, (b) => b.publishes),
    });
    this.counter({
      name: "octoprox_feed_publish_failures_total",
      help: "Feed publishes that failed (leading controller only).",
      samples: (scrape) => fromBuilder(scrape, (b) => b.publish_failures),
    });
    this.gauge({
      name: "octoprox_feed_last_publish_age_seconds",
      help: "Time since the last feed publish that worked; absent before the first " +
        "(leading controller only).",
      samples: (scrape) =>
        fromBuilder(
          scrape,
          (b) =>
            b.published_at === null
              ? null
              : seconds(Math.max(0, scrape.nowMs - Date.parse(b.published_at))),
        ),
    });
    this.gauge({
      name: "octoprox_connector_traffic_blocked",
      help: "1 while the connector is blocked by its traffic limit, as the last published feed " +
        "says (the decision gateways enforce), else 0; every connector with a limit " +
        "(leading controller only).",
      labelNames: ["connector"],
      samples: (scrape) => trafficSamples(scrape, "connector"),
    });
    this.gauge({
      name: "octoprox_project_traffic_blocked",
      help: "1 while the project is blocked by its traffic quota, as the last published feed " +
        "says, else 0; every project with a quota (leading controller only).",
      labelNames: ["project"],
      samples: (scrape) => trafficSamples(scrape, "project"),
    });
    this.gauge({
      name: "octoprox_feed_sections",
      help: "Sections of the last compile, the runtime section included; absent before the " +
        "first (leading controller only).",
      samples: (scrape) => fromBuilder(scrape, (b) => b.sections),
    });
  }
}

function perProducer(
  scrape: Scrape,
  value: (producer: JobProducerSnapshot) => number,
): Sample<"kind">[] {
  if (!leads(scrape.snapshot)) return [];
  return scrape.snapshot.loops.filter(isJobProducer).map((producer) => [
    { kind: producer.job_kind },
    value(producer),
  ]);
}

export class ProducerTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    const labelNames = ["kind"] as const;
    this.counter({
      name: "octoprox_job_producer_entries_total",
      help: "Entries the kind's producer appended to its job stream (leading controller only).",
      labelNames,
      samples: (scrape) => perProducer(scrape, (p) => p.published),
    });
    this.counter({
      name: "octoprox_job_producer_refusals_total",
      help: "Appends to the kind's job stream that Redis refused, each sent again at the next " +
        "cycle (leading controller only).",
      labelNames,
      samples: (scrape) => perProducer(scrape, (p) => p.refusals),
    });
  }
}
