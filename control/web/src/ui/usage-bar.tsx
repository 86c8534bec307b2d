/** Traffic used this period against the limit, the block and the pending badge, and a reset. */
import { useState } from "preact/hooks";
import type { TrafficUsage } from "../../../api/answers/common.ts";
import { formatBytes } from "./format.ts";
import { Time } from "./time.tsx";

export function UsageBar(
  { usage, canReset, onReset }: {
    usage: TrafficUsage;
    canReset: boolean;
    onReset: () => Promise<void>;
  },
) {
  const [busy, setBusy] = useState(false);
  const percent = Math.min(100, usage.percent ?? 0);
  return (
    <div class={`usage-bar status-${usage.status}`} aria-label="Traffic usage">
      <div class="usage-text">
        {formatBytes(usage.bytes)}
        {usage.limit_bytes !== null ? ` of ${formatBytes(usage.limit_bytes)}` : ""} this{" "}
        {usage.period}
        {usage.percent !== null ? ` (${usage.percent} %)` : ""}
        {usage.cost !== null ? `, ${usage.cost.toFixed(2)} ${usage.currency}` : ""}
        {usage.blocked
          ? (
            <span class="badge danger">
              blocked until <Time value={usage.blocked_until} />
            </span>
          )
          : null}
        {usage.pending ? <span class="badge warning">pending decision</span> : null}
      </div>
      <div class="bar">
        <div class="fill" style={{ width: `${percent}%` }} />
      </div>
      <div class="muted">
        Counting since <Time value={usage.counting_since} />; the period ends{" "}
        <Time value={usage.period_end} />
      </div>
      {canReset
        ? (
          <button
            type="button"
            class="secondary"
            disabled={busy}
            onClick={async () => {
              setBusy(true);
              try {
                await onReset();
              } finally {
                setBusy(false);
              }
            }}
          >
            Reset usage
          </button>
        )
        : null}
    </div>
  );
}
