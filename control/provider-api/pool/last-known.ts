/**
 * A provider-API connector's last-known settings, kept in Redis beside its pool
 * (`pool:<connector>:last_known`), so its pool runs go on while Postgres does not answer: the
 * gateways and extraction live on the pool, and a pool nobody reaps, checks or refills runs dry
 * within one proxy lifetime.
 *
 * Each pool run that read its connector from Postgres offers what it read; the record is written
 * only when a keyed digest of it moved, so a run every few seconds costs one HGET. The record
 * holds the credential's secrets, so it is sealed (control/provider-api/pool/credentials.ts),
 * bound to the connector's id: a record copied under another connector does not open.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import type { CredentialSealer } from "./credentials.ts";

/** What a pool run reads of its connector (the pool job turns it into its working view). */
export interface ConnectorSettings {
  id: string;
  projectId: string;
  kind: string;
  enabled: boolean;
  pendingDeletion: boolean;
  depleted: boolean;
  healthcheckUrl: string | null;
  /** The connector's config as Postgres holds it: read with the provider_api schema by its user. */
  config: unknown;
  /** Its credential's config (every value a secret); empty without a credential. */
  credential: Record<string, unknown>;
  /** Whether routing stood on it when read: in no sequence, or its sequence's current one. */
  current: boolean;
}

export type LastKnownRead =
  | { found: true; settings: ConnectorSettings; savedAtMs: number }
  /** `none`: never written (or purged); `unreadable`: sealed under another secret, or altered. */
  | { found: false; reason: "none" | "unreadable" };

/** The record's form, sealed with it: a later form is read as unreadable, never misread. */
const FORM = 1;

export interface LastKnownSettingsOptions {
  redis: Redis;
  keys: RedisKeys;
  sealer: CredentialSealer;
}

export class LastKnownSettings {
  readonly #o: LastKnownSettingsOptions;

  constructor(options: LastKnownSettingsOptions) {
    this.#o = options;
  }

  /**
   * Keeps `settings` as the connector's last-known ones when they differ from the stored ones;
   * answers whether it wrote. Two runs racing may write in either order: the next run's read
   * writes the newer again.
   */
  async save(settings: ConnectorSettings, nowMs: number): Promise<boolean> {
    const { redis, keys, sealer } = this.#o;
    // Fields in one fixed order, and jsonb reads back in one order: equal settings, equal text.
    const plain = JSON.stringify([
      FORM,
      {
        id: settings.id,
        projectId: settings.projectId,
        kind: settings.kind,
        enabled: settings.enabled,
        pendingDeletion: settings.pendingDeletion,
        depleted: settings.depleted,
        healthcheckUrl: settings.healthcheckUrl,
        config: settings.config,
        credential: settings.credential,
        current: settings.current,
      } satisfies ConnectorSettings,
    ]);
    const digest = sealer.settingsDigest(settings.id, plain);
    const key = keys.poolLastKnown(settings.id);
    if ((await redis.hget(key, "digest")) === digest) return false;
    await redis.hset(key, {
      digest,
      sealed: sealer.sealSettings(settings.id, plain),
      saved_at: String(nowMs),
    });
    return true;
  }

  /** The connector's last-known settings, when a run kept any this install can open. */
  async read(connectorId: string): Promise<LastKnownRead> {
    const { redis, keys, sealer } = this.#o;
    const [sealed, savedAt] = await redis.hmget(
      keys.poolLastKnown(connectorId),
      "sealed",
      "saved_at",
    );
    if (sealed === null) return { found: false, reason: "none" };
    let record: unknown;
    try {
      record = JSON.parse(sealer.openSettings(connectorId, sealed));
    } catch {
      return { found: false, reason: "unreadable" };
    }
    if (!Array.isArray(record) || record[0] !== FORM) return { found: false, reason: "unreadable" };
    const settings = record[1] as ConnectorSettings | null;
    if (typeof settings !== "object" || settings === null || settings.id !== connectorId) {
      return { found: false, reason: "unreadable" };
    }
    return { found: true, settings, savedAtMs: Number(savedAt) };
  }
}
