/**
 * A set for what comes and goes on the request path (open transfers, client connections,
 * watched deadlines): each item keeps its own place in an array, so adding and removing are a
 * store each, and nothing is allocated once the array has grown to its peak.
 *
 * Why not a `Set`: a V8 Set appends each new entry to its table and only marks a removed one.
 * Once the table is full of marks, V8 copies the live entries to a new table and leaves the old
 * one pointing at them and at its successor. Under constant churn that happens every few dozen
 * additions, and a long-lived Set's tables live in the old generation, so a dead table keeps what
 * it held (a transfer's meter, and through it the whole tunnel) alive through every young
 * collection until the next full one. In the gateway that kept about 3 KB per new tunnel alive
 * for a young collection to copy and then promote: four fifths of its collection pauses. Here a
 * removed item's place is cleared at once, and the array is never trimmed (its size goes up and
 * down without it being copied), so nothing keeps a removed item.
 *
 * An item is in at most one SlotSet at a time. Runtime-neutral.
 */

/** What a SlotSet holds: its place there, kept by the set (-1 while in none). */
export interface Slotted {
  slot: number;
}

export class SlotSet<T extends Slotted> {
  /** Live items in [0, size); past it, undefined up to the peak size. */
  readonly #items: (T | undefined)[] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds the item unless it is in already. */
  add(item: T): void {
    if (this.has(item)) return;
    const index = this.#size++;
    item.slot = index;
    if (index < this.#items.length) this.#items[index] = item;
    else this.#items.push(item);
  }

  /** Removes the item; false when it was not in. The last item takes its place. */
  delete(item: T): boolean {
    if (!this.has(item)) return false;
    const index = item.slot;
    const lastIndex = --this.#size;
    const last = this.#items[lastIndex]!;
    this.#items[index] = last;
    last.slot = index;
    this.#items[lastIndex] = undefined;
    item.slot = -1;
    return true;
  }

  has(item: T): boolean {
    const index = item.slot;
    return index >= 0 && index < this.#size && this.#items[index] === item;
  }

  /** The items now, in a copy of their own: the set may change while it is walked. */
  values(): T[] {
    return this.#items.slice(0, this.#size) as T[];
  }
}
