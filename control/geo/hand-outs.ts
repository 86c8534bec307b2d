/**
 * Hand-outs, counted forward-only: a hand-out is a proxy seen on another exit than the last one
 * counted for it. Each proxy's last counted exit is `proxy:last_exit:<proxy>` ("<observed_at
 * epoch ms> <ip>", a day from its last move), judged and moved by one script over a batch's
 * observations, oldest first (shared/lua/observation_hand_outs.lua), before the batch's
 * transaction: a verdict is made and recorded at once, so two workers count a transition once,
 * a redelivered batch counts none and a late observation counts none.
 *
 * Where a proxy has no record (new, idle for a day, a Redis wipe), the script starts one and the
 * batch's transaction decides from what Postgres knows (observation-writes.ts).
 *
 * Accepted: a batch whose transaction then fails has its records moved but its hand-outs not
 * counted.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { runScript } from "../core/scripts.ts";
import type { Observation } from "./observation.ts";

/** How long a proxy's last counted exit is kept after it last moved. */
export const LAST_EXIT_TTL_SECONDS = 86_400;

export const HandOut = {
  /** Seen on another exit than the last counted one. */
  yes: "yes",
  no: "no",
  /** No record: the batch's transaction decides. */
  unknown: "unknown",
} as const;
export type HandOut = (typeof HandOut)[keyof typeof HandOut];

const REPLIES: Readonly<Record<string, HandOut>> = { "1": "yes", "0": "no", "-1": "unknown" };

/**
 * Judges every observation that names a proxy, in the order given (oldest first); one that names
 * none is no hand-out. One script call for the whole batch.
 */
export async function judgeHandOuts(
  redis: Redis,
  keys: Pick<RedisKeys, "proxyLastExit">,
  observations: readonly Observation[],
): Promise<HandOut[]> {
  const verdicts: HandOut[] = observations.map(() => HandOut.no);
  const judged = observations.flatMap((o, index) => o.proxyId === null ? [] : [index]);
  if (judged.length === 0) return verdicts;
  const reply = await runScript(
    redis,
    "observation_hand_outs",
    judged.map((index) => keys.proxyLastExit(observations[index].proxyId!)),
    [
      LAST_EXIT_TTL_SECONDS,
      ...judged.flatMap((
        index,
      ) => [String(observations[index].observedAt), observations[index].ip]),
    ],
  );
  if (!Array.isArray(reply) || reply.length !== judged.length) {
    throw new Error(`Unexpected observation_hand_outs reply for ${judged.length} observations`);
  }
  judged.forEach((index, i) => {
    const verdict = REPLIES[String(reply[i])];
    if (verdict === undefined) throw new Error(`Unexpected hand-out verdict ${String(reply[i])}`);
    verdicts[index] = verdict;
  });
  return verdicts;
}
