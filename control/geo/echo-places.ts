/**
 * Where the echo places the addresses it answers: the databases in force, read again at most
 * every `refreshMs` in the background. The echo answers at once from the stack it holds (none
 * before the first read), so a slow or absent Postgres never holds an answer up.
 */
import type { GeoLocation } from "../../shared/geo/contract.ts";
import type { GeoStack } from "../../shared/geo/stack.ts";
import { errorText } from "../../shared/errors.ts";
import type { Logger } from "../core/logging.ts";

export interface EchoPlacesOptions {
  /** The databases in force (GeoDefinitions). */
  source: { current(): Promise<{ stack: GeoStack }> };
  logger: Logger;
  refreshMs?: number;
  now?: () => number;
}

export const ECHO_PLACES_REFRESH_MS = 10_000;

export class EchoPlaces {
  readonly #o: EchoPlacesOptions;
  #stack: GeoStack | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | undefined;
  #failing = false;

  constructor(options: EchoPlacesOptions) {
    this.#o = options;
  }

  /** Where the databases place `ip`, as last read; asks for a fresh read when it is due. */
  readonly placeOf = (ip: string): GeoLocation | undefined => {
    const now = (this.#o.now ?? Date.now)();
    if (
      this.#reading === undefined &&
      now - this.#readAt >= (this.#o.refreshMs ?? ECHO_PLACES_REFRESH_MS)
    ) {
      this.#readAt = now;
      this.#reading = this.refresh().finally(() => {
        this.#reading = undefined;
      });
    }
    return this.#stack?.lookup(ip);
  };

  /** Reads the databases in force now; never throws (a failure keeps the stack held). */
  async refresh(): Promise<void> {
    try {
      this.#stack = (await this.#o.source.current()).stack;
      if (this.#failing) this.#o.logger.info({}, "Echo reads its IP databases again");
      this.#failing = false;
    } catch (error) {
      if (!this.#failing) {
        this.#o.logger.warn(
          { error: errorText(error) },
          "Echo could not read its IP databases; it answers with those it holds",
        );
      }
      this.#failing = true;
    }
  }
}
