/**
 * A latency histogram in the manner of HdrHistogram: whole microseconds, exact below 128 µs,
 * then 64 buckets per power of two, so a recorded value is known within 1/64 (1.6%) of itself
 * at any magnitude, in a fixed 2,816 counters (up to 2^44 µs, about 200 days). Recording is
 * a few integer operations; percentiles are read as the upper bound of the bucket they fall in,
 * so a reported p99 is never below the true one. The maximum is kept exactly.
 *
 * Runtime-neutral (no node: or Deno APIs).
 */

/** Sub-buckets per power of two, once values pass 2 x SUB. */
const SUB = 64;
const SUB_BITS = 6;
/** Below this a value has a counter of its own. */
const LINEAR = 2 * SUB;
const MAX_SHIFT = 42;
const BUCKETS = LINEAR + MAX_SHIFT * SUB;

function bitLength(value: number): number {
  return value === 0 ? 0 : 32 - Math.clz32(value);
}

/** The bucket of a value in whole microseconds (non-negative). */
export function bucketOf(micros: number): number {
  if (micros < LINEAR) return micros;
  // Past 2^31 Math.clz32 cannot see the bits: count them in floating point.
  const bits = micros < 2 ** 31 ? bitLength(micros) : Math.floor(Math.log2(micros)) + 1;
  const shift = Math.min(bits - (SUB_BITS + 1), MAX_SHIFT);
  const top = Math.floor(micros / 2 ** shift); // in [SUB, 2 SUB)
  return Math.min(BUCKETS - 1, shift * SUB + top);
}

/** The largest value a bucket holds (what a percentile in it reports). */
export function bucketUpperBound(bucket: number): number {
  if (bucket < LINEAR) return bucket;
  const shift = Math.floor((bucket - SUB) / SUB);
  const top = bucket - shift * SUB;
  return (top + 1) * 2 ** shift - 1;
}

export class Histogram {
  readonly #counts = new Float64Array(BUCKETS);
  #total = 0;
  #sum = 0;
  #max = 0;
  #min = Number.POSITIVE_INFINITY;

  /** Records one value in microseconds (fractions are rounded; negatives count as 0). */
  record(micros: number): void {
    const value = micros > 0 ? Math.round(micros) : 0;
    this.#counts[bucketOf(value)]++;
    this.#total++;
    this.#sum += value;
    if (value > this.#max) this.#max = value;
    if (value < this.#min) this.#min = value;
  }

  /** Adds another histogram's counts to this one. */
  merge(other: Histogram): void {
    const counts = other.#counts;
    for (let i = 0; i < BUCKETS; i++) this.#counts[i] += counts[i];
    this.#total += other.#total;
    this.#sum += other.#sum;
    if (other.#max > this.#max) this.#max = other.#max;
    if (other.#min < this.#min) this.#min = other.#min;
  }

  get count(): number {
    return this.#total;
  }

  get max(): number {
    return this.#max;
  }

  get min(): number {
    return this.#total === 0 ? 0 : this.#min;
  }

  get mean(): number {
    return this.#total === 0 ? 0 : this.#sum / this.#total;
  }

  /**
   * The value at `quantile` (0..1): the upper bound of the bucket holding that rank, never more
   * than the maximum. 0 when empty.
   */
  percentile(quantile: number): number {
    if (this.#total === 0) return 0;
    const rank = Math.max(1, Math.ceil(quantile * this.#total));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.#counts[i];
      if (seen >= rank) return Math.min(bucketUpperBound(i), this.#max);
    }
    return this.#max;
  }
}
