/**
 * Dispatch's own counters on /metrics: the table of proxies (slots held now, its bound, and the
 * new proxies it refused when full, which are not routed here); misuse the invariants make harmless (a release or commit
 * twice, a commit after the release), which a correct gateway never shows, so a bug is seen; and
 * the reservations that lost their compare-and-swap at a proxy's limit (contention, not misuse).
 * The process's isolates share one set of counts (dispatch.ts), so each isolate reports the
 * process's total and the largest copy is the one kept.
 */
import { type Dispatch, DispatchErrorKind } from "../../shared/routing/dispatch.ts";
import type { MetricSample } from "./metrics.ts";

const MISUSE: readonly [DispatchErrorKind, string][] = [
  [DispatchErrorKind.doubleRelease, "double_release"],
  [DispatchErrorKind.doubleCommit, "double_commit"],
  [DispatchErrorKind.commitAfterRelease, "commit_after_release"],
];

export function dispatchSamples(dispatch: Dispatch): MetricSample[] {
  // The isolate that numbers the process's slots reports the table; the others follow it.
  const slots = dispatch.proxySlots;
  const table: MetricSample[] = !slots.numbering ? [] : [
    {
      name: "octoprox_gateway_proxy_slots",
      type: "gauge",
      labels: 'state="in_use"',
      value: slots.inUse,
      merge: "max",
    },
    ...(Number.isFinite(slots.capacity)
      ? [
        {
          name: "octoprox_gateway_proxy_slots",
          type: "gauge",
          labels: 'state="capacity"',
          value: slots.capacity,
          merge: "max",
        } satisfies MetricSample,
      ]
      : []),
    {
      name: "octoprox_gateway_proxies_refused_total",
      type: "counter",
      labels: "",
      value: slots.refused,
      merge: "max",
    },
  ];
  return [
    ...table,
    ...MISUSE.map(([kind, label]): MetricSample => ({
      name: "octoprox_gateway_dispatch_misuse_total",
      type: "counter",
      labels: `kind="${label}"`,
      value: dispatch.errors(kind),
      merge: "max",
    })),
    {
      name: "octoprox_gateway_dispatch_reserve_conflicts_total",
      type: "counter",
      labels: "",
      value: dispatch.errors(DispatchErrorKind.reserveConflict),
      merge: "max",
    },
  ];
}
