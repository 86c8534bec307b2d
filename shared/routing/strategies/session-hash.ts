/**
 * Where a new sticky session lands: a hash of the session id, so two gateways placing the same
 * session over the same eligible proxies agree without talking (seed: md5(session) mod n; any
 * stable, well-mixed hash does, and this one is a few multiplications on every runtime).
 */
import { hashId } from "../id-table.ts";
import type { ProxyEntry } from "../snapshot.ts";
import type { Candidates, ConnectorChoice, Selection } from "../strategy-contract.ts";
import { acrossConnectors, firstUsableFrom, weightedIndexAt } from "./common.ts";

/** MurmurHash3's finaliser: spreads FNV-1a's weak low bits over the whole word. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const TWO_32 = 2 ** 32;

/** Two independent unsigned 32-bit hashes of a session id: for the connector, and for the row. */
export function sessionHashes(sessionId: string): readonly [number, number] {
  const h = hashId(sessionId);
  return [mix(h), mix(h ^ 0x9e3779b9)];
}

/**
 * The session's place among the candidates: a connector by weight at the session's point (ids
 * in order, so every gateway sees the same list), then the row at hash mod n, or the next usable
 * one after it.
 */
export function placeSession(candidates: Candidates, sessionId: string): Selection {
  const [connectorHash, rowHash] = sessionHashes(sessionId);
  const at = connectorHash / TWO_32;
  return acrossConnectors(
    candidates,
    (choices: readonly ConnectorChoice[]) => weightedIndexAt(choices, at),
    (choice) => {
      const rows: readonly ProxyEntry[] = choice.rows;
      if (rows.length === 0) return undefined;
      const i = firstUsableFrom(rows, rowHash % rows.length, candidates.usable);
      return i === -1 ? undefined : rows[i];
    },
  );
}
