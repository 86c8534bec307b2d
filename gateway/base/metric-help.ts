/**
 * The HELP text of every metric family the gateway's /metrics writes, in one place: the socket
 * layer's counters, the core's (feed follower, request metering, the rate limiter, the failure
 * log, loop lag) alike. A family without an entry here is written without HELP, which
 * `promtool check metrics` refuses (tests/gateway-net/failure-log.test.ts runs it).
 */
export const METRIC_HELP: Readonly<Record<string, string>> = {
  // The socket layer (metrics.ts).
  octoprox_gateway_connections_open: "Client connections open.",
  octoprox_gateway_isolate_connections_open: "Client connections open, by isolate of the process.",
  octoprox_gateway_connections_total: "Client connections by result.",
  octoprox_gateway_tunnels_open: "Tunnels (CONNECT, SOCKS5) relaying now.",
  // TLS interception (net/tls/interceptor.ts).
  octoprox_gateway_mitm_tunnels_total:
    "Tunnels intercepted (their handshake with the client done).",
  octoprox_gateway_mitm_requests_total: "Requests served inside intercepted tunnels.",
  octoprox_gateway_mitm_browser_requests_total:
    "Requests inside intercepted tunnels sent with a browser's fingerprint, by browser.",
  octoprox_gateway_mitm_tunnel_ends_total:
    "Tunnels of intercepting projects left raw (bypassed, opted out, not TLS) or ended before their handshake was done, by why.",
  octoprox_gateway_mitm_client_alerts_total:
    "TLS alerts clients sent during interception handshakes (unknown_ca: the client does not trust the install's CA), by alert.",
  octoprox_gateway_mitm_certificates: "Host certificates held in the interception cache.",
  octoprox_gateway_mitm_captures_total:
    "Intercepted exchanges captured for the Inspector, by result (written; skipped: past a project's sample of a cycle; dropped: past a cycle's bound or Redis away).",
  octoprox_gateway_mitm_certificates_minted_total: "Host certificates minted.",
  octoprox_gateway_mitm_certificates_evicted_total:
    "Host certificates dropped from the cache to keep it within OCTOPROX_TLS_MITM_CERT_CACHE_SIZE.",
  octoprox_gateway_requests_total: "Requests by kind, outcome and the status answered.",
  octoprox_gateway_upstream_failures_total: "Failed upstream attempts by phase.",
  octoprox_gateway_retries_total: "Attempts retried on another proxy.",
  octoprox_gateway_block_verdicts_total:
    "Answers a project's block rules judged, by verdict and by the rule's mode (on: acted on; shadow: recorded only).",
  octoprox_gateway_cooldowns_held:
    "Exit and site pairs cooled down after block verdicts, held by this gateway now.",
  octoprox_gateway_cooldowns_total:
    "Cool-downs set by this gateway's verdicts, learned from other gateways, and dropped unwritten while Redis was away.",
  octoprox_gateway_domain_counts_total:
    "Per-site judging counts written to Redis, and those dropped over the bound while Redis was away.",
  octoprox_gateway_site_verdicts_total:
    "Answers judged on the most judged sites of this gateway since it started (OCTOPROX_METRICS_TOP_SITES of them per isolate), by project, site and verdict.",
  octoprox_gateway_escalations_total:
    "Sites moved between connector tiers by this gateway's reports of judged answers, by direction (up after a run of blocks, down after a run of good probes).",
  octoprox_gateway_escalation_probes_failed_total:
    "Probes of a cheaper tier that met a block, which keeps the site on its tier for another probe_after_seconds.",
  octoprox_gateway_escalated_sites:
    "Sites of escalated projects served above their cheapest tier, as this gateway last read them.",
  octoprox_gateway_block_retries_total:
    "Requests sent again through another exit after a block or rate-limit verdict.",
  octoprox_gateway_relay_bytes_total: "Bytes relayed, by direction.",
  octoprox_gateway_request_duration_seconds:
    "Requests from their head to their end (answer relayed, tunnel closed), by kind.",
  octoprox_gateway_upstream_connect_seconds:
    "Upstream connections opened: TCP, TLS and the proxy's handshake, until usable.",
  octoprox_gateway_ready: "1 when the gateway is ready (a feed applied, the ports bound).",
  octoprox_gateway_dispatch_misuse_total:
    "Dispatch misuse made harmless (double_release, double_commit, commit_after_release): a bug.",
  octoprox_gateway_proxy_slots:
    "The gateway's table of proxies: slots held now (in the feed, or leaving while busy) and its bound.",
  octoprox_gateway_proxies_refused_total:
    "New proxies of the feed left out because the table of proxies was full (not routed here).",
  octoprox_gateway_dispatch_reserve_conflicts_total:
    "Reservations that lost their compare-and-swap at a proxy's concurrency limit.",
  octoprox_gateway_log_lines_dropped: "Log lines dropped because the log's queue was full.",
  // The TLS interception CA (app/mitm-ca.ts).
  octoprox_gateway_tls_mitm_ca_expiry_timestamp_seconds:
    "When the TLS interception CA the gateway signs with expires, in seconds since the epoch.",
  // The feed follower (app/feed-status.ts).
  octoprox_gateway_feed_applies_total: "Routing feeds applied.",
  octoprox_gateway_feed_failures_total: "Feed reads that failed (nothing applied).",
  octoprox_gateway_feed_consecutive_failures: "Feed reads failed in a row.",
  octoprox_gateway_feed_applied_age_seconds: "Seconds since the feed in force was applied.",
  octoprox_gateway_feed_read_age_seconds:
    "Seconds since a read of the feed last verified its head (OCTOPROX_FEED_MAX_STALE counts it).",
  octoprox_gateway_feed_compiled_timestamp_seconds:
    "When the feed in force was compiled, in seconds since the epoch (the controller's clock).",
  // Request metering (gateway/metering/metering.ts).
  octoprox_gateway_metering_sends_total: "Metering batches sent to Redis, by result.",
  octoprox_gateway_redis_http_requests_total:
    "Requests to the Redis REST endpoint (HTTP transport only), by result.",
  octoprox_gateway_redis_http_bytes_total:
    "Bytes of request and answer bodies exchanged with the Redis REST endpoint (HTTP transport only).",
  octoprox_gateway_metering_consecutive_failures: "Metering sends failed in a row.",
  octoprox_gateway_metering_owed_parts: "Metering batches Redis has not confirmed yet.",
  octoprox_gateway_metering_pending_rows: "Metering rows waiting for the next batch.",
  octoprox_gateway_metering_meters_open: "Transfers being metered now.",
  octoprox_gateway_metering_hosts_folded_total:
    "Host counts added to the (other) host past the host cap.",
  octoprox_gateway_metering_rows_dropped_total: "Metering counts dropped past a cap.",
  octoprox_gateway_metering_parts_abandoned_total: "Metering batches a stop could not send.",
  octoprox_gateway_metering_increments_refused_total:
    "Increments Redis refused inside an applied batch.",
  octoprox_gateway_transfers_interrupted_total:
    "Running transfers stopped by the interrupt traffic action.",
  // The rate limiter (gateway/metering/rate-limiter.ts).
  octoprox_gateway_rate_limit_requests_total:
    "Requests through rate-limited connectors, counted or dropped.",
  octoprox_gateway_rate_limit_trips_total: "Proxies this gateway put in quarantine.",
  octoprox_gateway_rate_limit_write_failures_total: "Rate-limit window writes that failed.",
  // A project's request-rate limit (gateway/limits/request-rate.ts).
  octoprox_gateway_project_rate_requests_total:
    "Requests of rate-limited projects: admitted from a lease, admitted while Redis was away, refused.",
  octoprox_gateway_project_rate_leases_total:
    "Token leases asked of a project's Redis bucket, answered or failed.",
  octoprox_gateway_local_quarantines:
    "Proxies this gateway tripped that the applied feed does not carry yet.",
  // The failure log (gateway/metering/failure-log.ts).
  octoprox_gateway_failures_total: "Requests the gateway could not complete, by failure kind.",
  octoprox_gateway_failure_examples_total:
    "Failure examples: written to Redis, capped (over a cycle's limit or a repeat), dropped.",
  octoprox_gateway_failure_log_write_failures_total: "Failure example writes that failed.",
  // Pool evidence (gateway/metering/pool-evidence.ts).
  octoprox_gateway_pool_holds_writes_total:
    "Writes of what this gateway holds through provider-API proxies (for refill plans): written, failed.",
  octoprox_gateway_pool_evidence_total:
    "Connect failures through provider-API proxies reported to their pool job: written, dropped.",
  // IP databases (gateway/geo/metrics.ts).
  octoprox_gateway_geo_databases_loaded:
    "IP databases in the stack in force (the feed's list, fetched and checked).",
  octoprox_gateway_geo_database_entries:
    "Each IP database in force, by name and format: its geofeed lines or mmdb tree nodes.",
  octoprox_gateway_geo_pending:
    "1 while the feed lists IP database files the stack in force does not hold yet.",
  octoprox_gateway_geo_files_total:
    "IP database files fetched and opened, or refused (checksum, size or format wrong).",
  // Preflight (gateway/geo/preflight-counters.ts, sightings.ts).
  octoprox_gateway_preflight_checks_total:
    "Preflight checks of a routed request's exit: pass, mismatch, unknown (no answer: forwarded).",
  octoprox_gateway_preflight_cache_hits_total:
    "Preflight checks answered by a cached verdict, without an echo.",
  octoprox_gateway_preflight_echoes_total:
    "Preflight echoes through proxies (one per cache miss): answered, failed.",
  octoprox_gateway_preflight_retired_total:
    "Vendor session slots preflight retired on this gateway (30 s, until the worker rotates them).",
  octoprox_gateway_sightings_total:
    "Preflight sightings: recorded, published to the sightings stream, dropped (buffer full).",
  octoprox_gateway_sightings_pending: "Sightings held in memory, buffered or owed to Redis.",
  // Loop lag (shared/loop-lag.ts).
  octoprox_gateway_loop_lag_worst_seconds:
    "The worst lateness of a half-second timer in the last full minute, by isolate.",
  octoprox_gateway_loop_lag_mean_seconds:
    "The mean lateness of a half-second timer in the last full minute, by isolate.",
};

/** The `# HELP` line of a family (none for a name without an entry). */
export function helpLine(name: string): string | undefined {
  const help = METRIC_HELP[name];
  return help === undefined ? undefined : `# HELP ${name} ${help}`;
}
