/**
 * Deadlines for dials to upstream proxies, watched by one shared ticker rather than a timer per
 * dial: a runtime timer costs a new CONNECT more than the rest of its JavaScript, and nearly
 * every dial ends long before its deadline. A deadline fires at most DEADLINE_TICK_MS late. The
 * ticker runs only while a deadline is watched, and never keeps the process alive by itself.
 */
import { SlotSet, type Slotted } from "../../base/slot-set.ts";

export const DEADLINE_TICK_MS = 50;

export interface Deadline {
  /** Stops watching; safe to call again, and after the deadline fired. */
  cancel(): void;
}

class Entry implements Deadline, Slotted {
  readonly atMs: number;
  readonly onExpire: () => void;
  slot = -1;

  constructor(atMs: number, onExpire: () => void) {
    this.atMs = atMs;
    this.onExpire = onExpire;
  }

  cancel(): void {
    watched.delete(this);
  }
}

const watched = new SlotSet<Entry>();
let ticker: ReturnType<typeof setInterval> | undefined;

function tick(): void {
  const now = Date.now();
  for (const entry of watched.values()) {
    // Cancelled by an expiry before it in this tick, or not due yet.
    if (entry.atMs > now || !watched.delete(entry)) continue;
    try {
      entry.onExpire();
    } catch {
      // A timer callback that throws would end the process: an expiry's fault stays its own.
    }
  }
  if (watched.size === 0 && ticker !== undefined) {
    clearInterval(ticker);
    ticker = undefined;
  }
}

/** Calls `onExpire` once `ms` have passed, unless cancelled before. */
export function watchDeadline(ms: number, onExpire: () => void): Deadline {
  const entry = new Entry(Date.now() + ms, onExpire);
  watched.add(entry);
  if (ticker === undefined) {
    ticker = setInterval(tick, DEADLINE_TICK_MS);
    Deno.unrefTimer(ticker);
  }
  return entry;
}
