/**
 * A channel's signing secret at rest: sealed under a key of its own drawn from the install's
 * internal secret, bound to the channel's id (a sealed value copied to another channel does not
 * open). Restored into an install with another internal secret, it no longer opens: deliveries
 * say so in their log, and a new channel gets a new secret.
 */
import { openWith, sealKeyOf, sealWith } from "../core/seal.ts";

const LABEL = "octoprox/alerts/channel-secret/v1";

const keyOf = (internalSecret: string) => sealKeyOf(internalSecret, LABEL);

export function sealChannelSecret(internalSecret: string, channelId: string, secret: string) {
  return sealWith(keyOf(internalSecret), channelId, secret);
}

/** The secret; throws (never naming it) when it does not open under this install's secret. */
export function openChannelSecret(internalSecret: string, channelId: string, sealed: string) {
  return openWith(
    keyOf(internalSecret),
    channelId,
    sealed,
    "The sealed bytes of the channel's secret",
  );
}
