/**
 * What extraction did in this process, counted since it started, per project (and per mode
 * where a call has one): the api runtime reports it in its snapshot, and /metrics reads it from
 * there (control/node/telemetry/extraction.ts). Never an address, a key or a client: a project's
 * id is the finest label.
 */
import { EXTRACT_MODES } from "../../model/extraction.ts";

export { EXTRACT_MODES };
export type ExtractMode = (typeof EXTRACT_MODES)[number];

export interface ModeCounts {
  /** Calls that ran the extraction (replays and conflicts not counted). */
  calls: number;
  /** Proxies those calls asked for. */
  requested: number;
  /** Proxies they handed out. */
  returned: number;
  /** Calls that found fewer eligible proxies than asked. */
  insufficient: number;
}

export interface ProjectExtractionCounts {
  modes: Record<ExtractMode, ModeCounts>;
  /** Idempotency keys used again with another request (refused). */
  conflicts: number;
  /** Idempotency keys used again with the same request (the stored answer given). */
  replays: number;
  /** Leases their holder released. */
  released: number;
  /** Leases this process returned after their end. */
  lapsed: number;
  /** Renewals that moved a lease's end. */
  renewed: number;
}

export interface ExtractionSnapshot {
  projects: Record<string, ProjectExtractionCounts>;
}

const zeroMode = (): ModeCounts => ({ calls: 0, requested: 0, returned: 0, insufficient: 0 });

export class ExtractionStats {
  readonly #projects = new Map<string, ProjectExtractionCounts>();

  of(projectId: string): ProjectExtractionCounts {
    let counts = this.#projects.get(projectId);
    if (counts === undefined) {
      counts = {
        modes: { partial: zeroMode(), all_or_nothing: zeroMode() },
        conflicts: 0,
        replays: 0,
        released: 0,
        lapsed: 0,
        renewed: 0,
      };
      this.#projects.set(projectId, counts);
    }
    return counts;
  }

  extracted(projectId: string, mode: ExtractMode, requested: number, returned: number): void {
    const counts = this.of(projectId).modes[mode];
    counts.calls += 1;
    counts.requested += requested;
    counts.returned += returned;
    if (returned < requested) counts.insufficient += 1;
  }

  snapshot(): ExtractionSnapshot {
    const projects: Record<string, ProjectExtractionCounts> = {};
    for (const [id, counts] of this.#projects) {
      projects[id] = {
        ...counts,
        modes: {
          partial: { ...counts.modes.partial },
          all_or_nothing: { ...counts.modes.all_or_nothing },
        },
      };
    }
    return { projects };
  }
}
