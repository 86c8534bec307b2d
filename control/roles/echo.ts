/**
 * The echo runtime: a process of role `echo` answers `/echo` (the caller's address, the nonce,
 * and where the IP databases in force place the address) beside the probes on the API port, and
 * nothing else. An operator runs it where the proxies' exits can reach it (a public edge) while
 * the api stays private; health checks and preflight ask it through OCTOPROX_ECHO_URL.
 *
 * It needs no store to answer: the databases are read from Postgres in the background, and an
 * echo that cannot read them answers with those it holds (none before a first read).
 */
import type { Store } from "../../shared/errors.ts";
import type { ServiceDeps } from "../core/store.ts";
import { echoFastGets } from "../api/routes/public.ts";
import { GeoDefinitions } from "../geo/definitions.ts";
import { EchoPlaces } from "../geo/echo-places.ts";
import { BaseRuntime, type RuntimeName, type RuntimeOptions } from "./runtime.ts";

export interface EchoRuntimeOptions extends RuntimeOptions {
  deps: Pick<ServiceDeps, "database">;
}

export class EchoRuntime extends BaseRuntime {
  readonly name: RuntimeName = "echo";
  readonly stores: readonly Store[] = [];
  readonly places: EchoPlaces;
  /** What the process's HTTP listener answers before anything else. */
  readonly fastGets: ReturnType<typeof echoFastGets>;

  constructor(options: EchoRuntimeOptions) {
    super(options);
    const geo = new GeoDefinitions({ deps: options.deps, logger: options.logger });
    this.places = new EchoPlaces({ source: geo, logger: options.logger });
    this.fastGets = echoFastGets(this.places.placeOf);
  }

  protected override async beforeLoops(): Promise<void> {
    // Places from the first answer on; a store away only leaves the echo answering addresses.
    await this.places.refresh();
  }
}
