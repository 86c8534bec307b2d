/**
 * A Map for what the request path keeps to avoid redoing work (accepted credentials, encoded
 * heads, metering keys): bounded, and started afresh when full, since a few keys come back
 * request after request and a full rebuild of a cold one costs no more than the work it saves.
 * Runs unchanged on Node and Deno.
 */
export class BoundedMap<K, V> {
  readonly maxEntries: number;
  readonly #entries = new Map<K, V>();

  constructor(maxEntries: number) {
    this.maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  set(key: K, value: V): void {
    if (this.#entries.size >= this.maxEntries && !this.#entries.has(key)) this.#entries.clear();
    this.#entries.set(key, value);
  }

  /** The value kept for `key`, or `build`'s, kept. */
  getOrBuild(key: K, build: (key: K) => V): V {
    let value = this.#entries.get(key);
    if (value === undefined) {
      value = build(key);
      this.set(key, value);
    }
    return value;
  }

  clear(): void {
    this.#entries.clear();
  }
}
