/**
 * The api runtime: seeds the first admin, then serves the admin API (which mounts the probes)
 * on the API port. A password it generated for the first admin is printed once, as one line on
 * standard output and never through the logger, so it lands in no log store.
 */
import type { ApiDeps } from "../api/deps.ts";
import { createApp } from "../api/app.ts";
import { Extraction } from "../provider-api/extraction/extraction.ts";
import { seedFirstAdmin } from "../services/users.ts";
import { ensureOpenvpnSettings } from "../services/openvpn-settings.ts";
import { ensureWireguardSettings } from "../services/wireguard-settings.ts";
import { reloadConfigFile } from "../config/reload.ts";
import { Store } from "../../shared/errors.ts";
import { HttpServer } from "../core/http-server.ts";
import { echoFastGets } from "../api/routes/public.ts";
import { GeoDefinitions } from "../geo/definitions.ts";
import { EchoPlaces } from "../geo/echo-places.ts";
import { AlertDeliverer, deliveryPollMs } from "../alerts/deliverer.ts";
import { AlertEvaluator } from "../alerts/evaluator.ts";
import type { Loop } from "../../shared/async/loop.ts";
import { BaseRuntime, type RuntimeName } from "./runtime.ts";

export interface ApiRuntimeOptions {
  deps: ApiDeps;
  /** Where the one line with a generated password goes; standard output by default. */
  announce?: (line: string) => void;
}

export class ApiRuntime extends BaseRuntime {
  readonly name: RuntimeName = "api";
  // An api serves its reads without the soft state, so only Postgres keeps it from serving.
  readonly stores: readonly Store[] = [Store.postgres];
  readonly #deps: ApiDeps;
  readonly #extraction: Extraction;
  readonly #announce: (line: string) => void;
  /** Alerting runs in every api process: one insert wins however many see a condition. */
  readonly #alertEvaluator: AlertEvaluator;
  readonly #alertDeliverer: AlertDeliverer;
  #server: HttpServer | undefined;

  constructor(options: ApiRuntimeOptions) {
    super({ logger: options.deps.logger });
    // Built here, so the runtime's snapshot (and /metrics) reads the app's extraction counts.
    this.#extraction = options.deps.extraction ?? new Extraction(options.deps);
    // One view of the databases for the process's routes and its echo: each file opened once.
    const geo = options.deps.geo ??
      new GeoDefinitions({
        deps: options.deps,
        logger: options.deps.logger.child({ part: "geo" }),
      });
    const echoPlaces = options.deps.echoPlaces ??
      new EchoPlaces({ source: geo, logger: options.deps.logger.child({ part: "echo" }) });
    this.#deps = { ...options.deps, extraction: this.#extraction, geo, echoPlaces };
    this.#announce = options.announce ?? ((line) => process.stdout.write(`${line}\n`));
    const { settings, logger } = options.deps;
    this.#alertDeliverer = new AlertDeliverer({
      database: options.deps.database,
      settings,
      logger,
      pollMs: deliveryPollMs(settings.alertRetryBaseDelayMs),
    });
    this.#alertEvaluator = new AlertEvaluator({
      deps: options.deps,
      intervalMs: settings.alertEvaluationIntervalMs,
      onOwed: () => this.#alertDeliverer.wake(),
    });
  }

  protected override loops(): Loop[] {
    return [this.#alertEvaluator, this.#alertDeliverer];
  }

  /** The address the API answers on, once started. */
  get url(): string | undefined {
    return this.#server?.url;
  }

  protected override async beforeLoops(): Promise<void> {
    const seeded = await seedFirstAdmin(this.#deps);
    // The install's WireGuard and OpenVPN identities, made once: the first api's insert wins.
    await ensureWireguardSettings(this.#deps);
    await ensureOpenvpnSettings(this.#deps);
    if (seeded.created) {
      this.logger.info({ username: seeded.username }, "First admin created");
    }
    if (seeded.generatedPassword !== undefined) {
      this.#announce(
        `Octoprox: first admin created: username ${seeded.username}, password ` +
          `${seeded.generatedPassword} (shown this once; change it after logging in)`,
      );
    }
  }

  /** SIGHUP re-reads the configuration file; a bad one is logged and changes nothing. */
  readonly #onHangup = () => {
    void reloadConfigFile(this.#deps, "sighup")?.catch(() => {});
  };

  protected override async afterLoops(): Promise<void> {
    if (this.#deps.settings.configFile !== undefined) {
      // A file that fails leaves the stored configuration as it was; the api serves anyway.
      await reloadConfigFile(this.#deps, "start")?.catch(() => {});
      process.on("SIGHUP", this.#onHangup);
    }
    const { settings } = this.#deps;
    // The echo places addresses from its first answer on, not a refresh later.
    await this.#deps.echoPlaces?.refresh();
    this.#server = new HttpServer({
      app: createApp(this.#deps),
      host: settings.apiHost,
      port: settings.apiPort,
      fastGets: echoFastGets(this.#deps.echoPlaces?.placeOf),
    });
    await this.#server.start();
  }

  protected override details(): Record<string, unknown> {
    return { extraction: this.#extraction.snapshot() };
  }

  protected override async beforeLoopsStop(): Promise<void> {
    process.off("SIGHUP", this.#onHangup);
    await this.#server?.stop();
  }
}
