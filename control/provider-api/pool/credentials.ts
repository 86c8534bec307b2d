/**
 * A pool entry's credentials, sealed before they reach Redis: AES-256-GCM under a key drawn
 * from OCTOPROX_INTERNAL_SECRET by HKDF-SHA256 with a label of its own (so it equals no feed
 * key), a fresh 12-byte nonce each, the entry's id as associated data (a sealed value copied to
 * another entry does not open). Synchronous node:crypto: a 10,000-proxy answer seals in a few
 * milliseconds, where WebCrypto's promise per value would cost more than the parse.
 *
 * Every control process that needs them (the pool job to check through a proxy, the feed
 * publish, the extraction answer) derives the same key from the same secret.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from "node:crypto";

const LABEL = "octoprox/pool/credentials/v1";
const DIGEST_LABEL = "octoprox/pool/key-digest/v1";
const SALT = "octoprox internal secret";
const VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export interface PoolCredentials {
  username: string | null;
  password: string | null;
}

/** The sealing key of an install; derive once per process. */
export class CredentialSealer {
  readonly #key: Buffer;
  readonly #digestKey: Buffer;

  constructor(internalSecret: string) {
    if (internalSecret.length === 0) throw new Error("The internal secret must not be empty");
    this.#key = Buffer.from(hkdfSync("sha256", internalSecret, SALT, LABEL, 32));
    this.#digestKey = Buffer.from(hkdfSync("sha256", internalSecret, SALT, DIGEST_LABEL, 32));
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
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, nonce);
    cipher.setAAD(Buffer.from(entryId, "utf8"));
    const plain = Buffer.from(JSON.stringify([credentials.username, credentials.password]));
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([Buffer.of(VERSION), nonce, body, cipher.getAuthTag()]).toString(
      "base64",
    );
  }

  /**
   * The credentials of a sealed text; throws when it does not open (another secret, another
   * entry, altered). The message never carries the text.
   */
  open(entryId: string, sealed: string | null): PoolCredentials {
    if (sealed === null) return { username: null, password: null };
    const bytes = Buffer.from(sealed, "base64");
    if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] !== VERSION) {
      throw new Error("A pool entry's sealed credentials are not of a known form");
    }
    try {
      const decipher = createDecipheriv(
        "aes-256-gcm",
        this.#key,
        bytes.subarray(1, 1 + NONCE_BYTES),
      );
      decipher.setAAD(Buffer.from(entryId, "utf8"));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES)),
        decipher.final(),
      ]);
      const [username, password] = JSON.parse(plain.toString("utf8")) as [
        string | null,
        string | null,
      ];
      return { username, password };
    } catch (error) {
      throw new Error("A pool entry's credentials do not open under this install's secret", {
        cause: error,
      });
    }
  }
}
