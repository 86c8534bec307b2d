/**
 * A pool entry's credentials, sealed before they reach Redis: AES-256-GCM under a key drawn
 * from OCTOPROX_INTERNAL_SECRET by HKDF-SHA256 with a label of its own (so it equals no feed
 * key), a fresh 12-byte nonce each, the entry's id as associated data (a sealed value copied to
 * another entry does not open). Synchronous node:crypto: a 10,000-proxy answer seals in a few
 * milliseconds, where WebCrypto's promise per value would cost more than the parse.
 *
 * Every control process that needs them (the pool job to check through a proxy, the feed
 * publish, the extraction answer) derives the same key from the same secret.
 *
 * The same sealing, under keys of their own, keeps a connector's last-known settings in Redis
 * (control/provider-api/pool/last-known.ts): its credential's secrets among them, bound to the
 * connector's id.
 */
import { createHmac } from "node:crypto";
import { deriveSealKey, openWith, sealWith } from "../../core/seal.ts";

const LABEL = "octoprox/pool/credentials/v1";
const DIGEST_LABEL = "octoprox/pool/key-digest/v1";
const SETTINGS_LABEL = "octoprox/pool/connector-settings/v1";
const SETTINGS_DIGEST_LABEL = "octoprox/pool/connector-settings-digest/v1";

export interface PoolCredentials {
  username: string | null;
  password: string | null;
}

/** The sealing key of an install; derive once per process. */
export class CredentialSealer {
  readonly #key: Buffer;
  readonly #digestKey: Buffer;
  readonly #settingsKey: Buffer;
  readonly #settingsDigestKey: Buffer;

  constructor(internalSecret: string) {
    const derive = (label: string) => deriveSealKey(internalSecret, label);
    this.#key = derive(LABEL);
    this.#digestKey = derive(DIGEST_LABEL);
    this.#settingsKey = derive(SETTINGS_LABEL);
    this.#settingsDigestKey = derive(SETTINGS_DIGEST_LABEL);
  }

  /**
   * A proxy's uniqueness key as Redis keeps it: a keyed digest (128 bits, hex), since the key
   * holds the proxy's username and a plain hash of a guessed one could be confirmed.
   */
  keyDigest(key: string): string {
    return createHmac("sha256", this.#digestKey).update(key).digest("hex").slice(0, 32);
  }

  /** The sealed text of `credentials` for entry `entryId`; null when there are none. */
  seal(entryId: string, credentials: PoolCredentials): string | null {
    if (credentials.username === null && credentials.password === null) return null;
    return sealWith(
      this.#key,
      entryId,
      JSON.stringify([credentials.username, credentials.password]),
    );
  }

  /**
   * The credentials of a sealed text; throws when it does not open (another secret, another
   * entry, altered). The message never carries the text.
   */
  open(entryId: string, sealed: string | null): PoolCredentials {
    if (sealed === null) return { username: null, password: null };
    const plain = openWith(this.#key, entryId, sealed, "A pool entry's credentials");
    const [username, password] = JSON.parse(plain) as [string | null, string | null];
    return { username, password };
  }

  /**
   * The sealed text of a connector's settings (JSON, its credential's secrets included), bound
   * to the connector's id: a record copied to another connector does not open.
   */
  sealSettings(connectorId: string, plain: string): string {
    return sealWith(this.#settingsKey, connectorId, plain);
  }

  /** The settings of a sealed text; throws when it does not open (another secret, connector, altered). */
  openSettings(connectorId: string, sealed: string): string {
    return openWith(this.#settingsKey, connectorId, sealed, "A connector's last-known settings");
  }

  /**
   * A keyed digest of a connector's settings (128 bits, hex), to tell a change without opening
   * the stored ones; keyed, since a plain hash of settings holding a secret would confirm a guess.
   */
  settingsDigest(connectorId: string, plain: string): string {
    return createHmac("sha256", this.#settingsDigestKey).update(connectorId).update("\0")
      .update(plain).digest("hex").slice(0, 32);
  }
}
