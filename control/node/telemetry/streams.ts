/**
 * How far each stream follower has read each event stream it follows (the change stream, the
 * runtime stream): labelled by the follower's loop and the stream's name, both fixed sets.
 */
import type { Registry } from "prom-client";
import type { FollowedStreamSnapshot } from "../../core/consumers.ts";
import { type Sample, type Scrape, seconds, TelemetryPart } from "./family.ts";
import { isFollower } from "./rows.ts";

type StreamSample = Sample<"loop" | "stream">;

function perStream(
  scrape: Scrape,
  value: (stream: FollowedStreamSnapshot) => number,
): StreamSample[] {
  return scrape.snapshot.loops.filter(isFollower).flatMap((loop) =>
    loop.streams.map((stream) => [{ loop: loop.name, stream: stream.stream }, value(stream)])
  );
}

/** The time part of a stream entry id (`<ms>-<seq>`), in milliseconds; 0 for `0-0`. */
export function idMillis(id: string): number {
  const ms = Number(id.slice(0, id.indexOf("-")));
  return Number.isFinite(ms) ? ms : 0;
}

export class StreamTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    const labelNames = ["loop", "stream"] as const;
    this.gauge({
      name: "octoprox_stream_position_timestamp_seconds",
      help: "When the last entry the follower read was added (its id's time, Unix time); " +
        "0 before any.",
      labelNames,
      samples: (scrape) => perStream(scrape, (s) => seconds(idMillis(s.position))),
    });
    this.counter({
      name: "octoprox_stream_entries_read_total",
      help: "Entries the follower read as they came.",
      labelNames,
      samples: (scrape) => perStream(scrape, (s) => s.entries_read),
    });
    this.counter({
      name: "octoprox_stream_gaps_total",
      help: "Gaps the follower found (the stream trimmed past its position, wiped or " +
        "recreated), each answered by a full read.",
      labelNames,
      samples: (scrape) => perStream(scrape, (s) => s.gaps),
    });
    this.counter<"loop">({
      name: "octoprox_stream_full_reads_total",
      help: "Full reads of what the follower keeps: at start, after a gap or a failed read, " +
        "and every reconcile interval.",
      labelNames: ["loop"],
      samples: ({ snapshot }) =>
        snapshot.loops.filter(isFollower).map((loop) => [{ loop: loop.name }, loop.full_reads]),
    });
  }
}
