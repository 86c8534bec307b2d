/**
 * A metric family read off the scrape's snapshot. Each is a prom-client Counter or Gauge whose
 * values are worked out when the registry renders it, from the one snapshot the scrape took:
 * nothing is counted between scrapes, and a family can never disagree with the heartbeat. The
 * registry renders the text (HELP, TYPE, escaping, the role label on every sample).
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { ProcessSnapshot } from "../heartbeat.ts";

/** What one scrape reads: the process's snapshot, taken once, and the time it was taken. */
export interface Scrape {
  snapshot: ProcessSnapshot;
  nowMs: number;
}

export type Labels<L extends string> = Record<L, string>;

/** A family's samples at one scrape: each label set once, with its value. */
export type Sample<L extends string> = readonly [labels: Labels<L>, value: number];

export interface FamilyOptions<L extends string> {
  /** `octoprox_…`, with its unit (`_seconds`) and, for a counter, `_total`. */
  name: string;
  help: string;
  labelNames?: readonly L[];
  /**
   * The samples at this scrape. A count lists every label set it can take, zero or not, so a
   * first failure is never lost to `rate()`; a family that does not apply lists none.
   */
  samples(scrape: Scrape): Iterable<Sample<L>>;
}

/**
 * Makes a family answer the scrape's snapshot: the base still answers the name, help and type,
 * and the values are worked out from the snapshot as the registry renders the family.
 */
function readsSnapshot<L extends string>(
  metric: Counter<L> | Gauge<L>,
  options: FamilyOptions<L>,
  read: () => Scrape,
): void {
  const base = metric.get.bind(metric);
  metric.get = async () => {
    // Read before the first await, while the registry asks every family in turn: the scrape
    // in hand is the one every family of this render reads.
    const values = [...options.samples(read())].map(([labels, value]) => ({ labels, value }));
    return { ...(await base()), values };
  };
}

function configuration<L extends string>(registry: Registry, options: FamilyOptions<L>) {
  return {
    name: options.name,
    help: options.help,
    labelNames: options.labelNames ?? [],
    registers: [registry],
  };
}

/** The base of each part's telemetry: it declares its families on the process's registry. */
export abstract class TelemetryPart {
  readonly #registry: Registry;
  readonly #read: () => Scrape;

  constructor(registry: Registry, read: () => Scrape) {
    this.#registry = registry;
    this.#read = read;
  }

  protected counter<L extends string = never>(options: FamilyOptions<L>): void {
    readsSnapshot(new Counter(configuration(this.#registry, options)), options, this.#read);
  }

  protected gauge<L extends string = never>(options: FamilyOptions<L>): void {
    readsSnapshot(new Gauge(configuration(this.#registry, options)), options, this.#read);
  }
}

/** Milliseconds to seconds, for `_seconds` families. */
export function seconds(ms: number): number {
  return ms / 1000;
}

/** 1 for true, 0 for false. */
export function flag(value: boolean): number {
  return value ? 1 : 0;
}
