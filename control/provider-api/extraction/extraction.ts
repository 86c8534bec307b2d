/**
 * The extraction API's parts, built once per api process (or per test app): the distribution
 * key check, the project connector lists, the service and its counts. The api runtime reports
 * the counts in its snapshot, which /metrics reads.
 */
import type { ControlDeps } from "../../core/deps.ts";
import { poolStoreOf } from "../pool/store.ts";
import { ConnectorCache } from "./connectors.ts";
import { DistributionKeys } from "./keys.ts";
import { ExtractionService } from "./service.ts";
import { type ExtractionSnapshot, ExtractionStats } from "./stats.ts";

export interface ExtractionOptions {
  /** KEY_FRESH_MS unless told (tests of the revocation bound use the default). */
  keyFreshMs?: number;
  connectorsFreshMs?: number;
}

export class Extraction {
  readonly keys: DistributionKeys;
  readonly connectors: ConnectorCache;
  readonly stats = new ExtractionStats();
  readonly service: ExtractionService;

  constructor(deps: ControlDeps, options: ExtractionOptions = {}) {
    const logger = deps.logger.child({ part: "extraction" });
    this.keys = new DistributionKeys({ deps, logger, freshMs: options.keyFreshMs });
    this.connectors = new ConnectorCache({
      deps,
      logger,
      freshMs: options.connectorsFreshMs,
    });
    this.service = new ExtractionService({
      redis: deps.redis,
      keys: deps.keys,
      jobs: deps.jobs,
      logger,
      sealer: poolStoreOf(deps).sealer,
      connectors: this.connectors,
      stats: this.stats,
      deadlineMs: deps.settings.redisRequestTimeoutMs,
    });
  }

  snapshot(): ExtractionSnapshot {
    return this.stats.snapshot();
  }
}
