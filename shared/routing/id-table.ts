/**
 * A read-only table from ids to epoch-ms deadlines, with our own string hash.
 *
 * Why not a Map: a runtime section is decoded afresh on every change, and keying a Map by its
 * 2,000 new id strings makes V8 hash each of them on first use, which under Deno (V8 15) cost
 * 0.45-0.75 ms in a gateway-sized heap, over the 0.3 ms budget. Here the ids are hashed by a loop
 * over their characters (FNV-1a) into an open-addressing `Int32Array`, and each snapshot row keeps
 * its id's hash, so a lookup costs one probe and one string compare.
 */

/** FNV-1a over the UTF-16 code units, as an int32. */
export function hashId(id: string): number {
  let h = 0x811c9dc5 | 0;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h;
}

export class DeadlineTable {
  /** Entry index + 1 per bucket; 0 for empty. */
  private readonly buckets: Int32Array;
  private readonly mask: number;
  private readonly ids: string[] = [];
  private readonly untilMs: Float64Array;

  /** Builds from any list; a repeated id keeps its last deadline. */
  constructor(count: number, idAt: (i: number) => string, untilAt: (i: number) => number) {
    let size = 8;
    while (size < count * 2) size *= 2;
    this.buckets = new Int32Array(count === 0 ? 0 : size);
    this.mask = size - 1;
    this.untilMs = new Float64Array(count);
    for (let i = 0; i < count; i++) this.insert(idAt(i), untilAt(i));
  }

  get size(): number {
    return this.ids.length;
  }

  private insert(id: string, until: number): void {
    let b = hashId(id) & this.mask;
    for (;;) {
      const at = this.buckets[b];
      if (at === 0) {
        this.ids.push(id);
        this.untilMs[this.ids.length - 1] = until;
        this.buckets[b] = this.ids.length;
        return;
      }
      if (this.ids[at - 1] === id) {
        this.untilMs[at - 1] = until;
        return;
      }
      b = (b + 1) & this.mask;
    }
  }

  /** The id's deadline, or undefined; `hash` is `hashId(id)`, passed when the caller keeps it. */
  get(id: string, hash: number = hashId(id)): number | undefined {
    if (this.ids.length === 0) return undefined;
    let b = hash & this.mask;
    for (;;) {
      const at = this.buckets[b];
      if (at === 0) return undefined;
      if (this.ids[at - 1] === id) return this.untilMs[at - 1];
      b = (b + 1) & this.mask;
    }
  }

  *entries(): IterableIterator<[string, number]> {
    for (let i = 0; i < this.ids.length; i++) yield [this.ids[i], this.untilMs[i]];
  }
}
