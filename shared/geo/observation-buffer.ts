/**
 * What a process holds of the observations it recorded and has not seen appended yet: a buffer
 * of at most `capacity` items (5,000), which drops its oldest once full, and at most one part
 * cut from it and sent but not confirmed (owed). A part is numbered once, when it is cut, and
 * goes again unchanged until confirmed; the numbers only grow, so the stream's script, which
 * remembers a writer's highest applied number (`applied:<writer>`), applies a part sent again
 * after a lost reply once. Through a Redis outage a process so holds at most one part and a full
 * buffer.
 *
 * Observations are serialised when a part is cut, never when recorded: recording is the request
 * path's (or a check's) and costs a push. Runtime-neutral, so the gateway's recorder can hold its
 * observations in the same thing.
 */
import { encodeObservation, type Observation } from "./observation-wire.ts";

/** Items a buffer holds at most, and a part at most. */
export const OBSERVATION_BUFFER_CAPACITY = 5_000;

/** A numbered part: the entries' JSON, oldest first. */
export interface ObservationPart {
  number: number;
  entries: readonly string[];
}

export interface ObservationBufferCounts {
  /** Observations recorded. */
  recorded: number;
  /** Observations in parts the stream confirmed. */
  published: number;
  /** Oldest observations dropped from a full buffer. */
  dropped: number;
  /** In the buffer now, not cut yet. */
  buffered: number;
  /** In the owed part (cut, sent or about to be, not confirmed). */
  owed: number;
}

export class ObservationBuffer {
  readonly capacity: number;
  /** A ring: `#size` items from `#head`, oldest first. */
  readonly #ring: (Observation | undefined)[];
  #head = 0;
  #size = 0;
  #owed: ObservationPart | undefined;
  #nextNumber: number;
  #recorded = 0;
  #published = 0;
  #dropped = 0;

  /** `firstNumber`: the number of the first part (1 for a fresh writer). */
  constructor(capacity = OBSERVATION_BUFFER_CAPACITY, firstNumber = 1) {
    if (!(capacity >= 1)) throw new Error("An observation buffer holds at least one item");
    this.capacity = capacity;
    this.#ring = new Array(capacity);
    this.#nextNumber = firstNumber;
  }

  get size(): number {
    return this.#size;
  }

  /** The part cut and not confirmed yet, if any. */
  get owed(): ObservationPart | undefined {
    return this.#owed;
  }

  /** Takes an observation; a full buffer drops its oldest. Never throws. */
  record(observation: Observation): void {
    this.#recorded++;
    if (this.#size === this.capacity) {
      this.#ring[this.#head] = undefined;
      this.#head = (this.#head + 1) % this.capacity;
      this.#size--;
      this.#dropped++;
    }
    this.#ring[(this.#head + this.#size) % this.capacity] = observation;
    this.#size++;
  }

  /**
   * The part to send now: the owed one, unchanged, or else a new one cut from the buffer (all of
   * it, oldest first); undefined when there is nothing to send.
   */
  next(): ObservationPart | undefined {
    if (this.#owed !== undefined) return this.#owed;
    if (this.#size === 0) return undefined;
    const entries: string[] = [];
    for (let i = 0; i < this.#size; i++) {
      const at = (this.#head + i) % this.capacity;
      entries.push(encodeObservation(this.#ring[at]!));
      this.#ring[at] = undefined;
    }
    this.#head = 0;
    this.#size = 0;
    this.#owed = { number: this.#nextNumber++, entries };
    return this.#owed;
  }

  /** The stream has the part (applied now, or before): it is owed no more. */
  confirmed(part: ObservationPart): void {
    if (this.#owed !== part) return;
    this.#owed = undefined;
    this.#published += part.entries.length;
  }

  counts(): ObservationBufferCounts {
    return {
      recorded: this.#recorded,
      published: this.#published,
      dropped: this.#dropped,
      buffered: this.#size,
      owed: this.#owed?.entries.length ?? 0,
    };
  }
}
