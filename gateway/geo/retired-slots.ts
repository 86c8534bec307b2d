/**
 * Vendor session slots preflight retired on this isolate: a slot whose exit contradicts its
 * vendor's claim under `retry` or `reject` is the worker's to delete (the sighting ingest), and
 * until that delete reaches the feed the slot is kept out of this project's routing here, for
 * 30 s at most. Local and never shared or persisted, as the rate limiter's trips are.
 */

/** How long a retired slot stays out: the worker's delete reaches the feed well within it. */
export const RETIRED_SLOT_MS = 30_000;
/** Retired slots kept at most; past it the oldest go first. */
const MAX_RETIRED = 10_000;

export class RetiredSlots {
  readonly #nowMs: () => number;
  /** By project, then proxy: epoch ms the slot comes back. */
  readonly #byProject = new Map<string, Map<string, number>>();
  #size = 0;

  constructor(nowMs: () => number = Date.now) {
    this.#nowMs = nowMs;
  }

  get size(): number {
    return this.#size;
  }

  retire(projectId: string, proxyId: string): void {
    if (this.#size >= MAX_RETIRED) this.#prune(true);
    let slots = this.#byProject.get(projectId);
    if (slots === undefined) this.#byProject.set(projectId, slots = new Map());
    if (!slots.has(proxyId)) this.#size++;
    slots.set(proxyId, this.#nowMs() + RETIRED_SLOT_MS);
  }

  /**
   * `exclude` with the project's retired slots added; `exclude` itself when it has none (the
   * usual case: no set is built).
   */
  excluding(projectId: string, exclude: ReadonlySet<string>): ReadonlySet<string> {
    const slots = this.#byProject.get(projectId);
    if (slots === undefined) return exclude;
    const nowMs = this.#nowMs();
    let merged: Set<string> | undefined;
    for (const [proxyId, untilMs] of slots) {
      if (untilMs <= nowMs) {
        slots.delete(proxyId);
        this.#size--;
        continue;
      }
      (merged ??= new Set(exclude)).add(proxyId);
    }
    if (slots.size === 0) this.#byProject.delete(projectId);
    return merged ?? exclude;
  }

  /** Drops the ended ones; when `full`, the oldest half too. */
  #prune(full: boolean): void {
    const nowMs = this.#nowMs();
    const cutoff = full ? nowMs + RETIRED_SLOT_MS / 2 : nowMs;
    for (const [projectId, slots] of this.#byProject) {
      for (const [proxyId, untilMs] of slots) {
        if (untilMs <= cutoff) {
          slots.delete(proxyId);
          this.#size--;
        }
      }
      if (slots.size === 0) this.#byProject.delete(projectId);
    }
  }
}
