/**
 * One run of host certificate minting, as a gateway mints them (shared/tls/ca.ts): a CA made
 * and loaded, then a certificate for each of 2,000 distinct new hosts over the one leaf key,
 * each timed alone (after 200 to warm the code up), for three pairs of CA and leaf key: ECDSA
 * P-256 both, an ECDSA CA over an RSA 2048 leaf key, RSA 2048 both. Beside them, what making a
 * leaf key per host would cost (the spec's reason for the one key). Prints one JSON line; the
 * `tls-ca` suite runs it under Deno, one fresh process per run:
 *
 *   DENO_NO_UPDATE_CHECK=1 npx deno run scripts/bench/tls-mint.ts
 *   npx tsx scripts/bench/tls-mint.ts           # under Node
 */
import { createCa, type KeyKind, loadCa } from "../../shared/tls/ca.ts";

const WARM = 200;
const HOSTS = 2000;
const KEYGENS = 20;

export interface MintFigures {
  /** Milliseconds per certificate. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface TlsMintResult {
  runtime: string;
  hosts: number;
  ecdsa: MintFigures;
  ecdsaCaRsaLeaf: MintFigures;
  rsa: MintFigures;
  /** Median milliseconds to make one key pair of each kind (what a key per host would add). */
  keygenEcdsaMs: number;
  keygenRsaMs: number;
}

function quantile(sorted: readonly number[], share: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(share * sorted.length) - 1))];
}

async function mintTimes(caKind: KeyKind, leafKind: KeyKind, tag: string): Promise<MintFigures> {
  const ca = await loadCa(await createCa({ keyKind: caKind }), { leafKeyKind: leafKind });
  for (let i = 0; i < WARM; i++) await ca.mint(`warm-${i}.${tag}.example`);
  const times: number[] = [];
  for (let i = 0; i < HOSTS; i++) {
    const started = performance.now();
    await ca.mint(`host-${i}.${tag}.example`);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50Ms: quantile(times, 0.5), p99Ms: quantile(times, 0.99), maxMs: times.at(-1)! };
}

async function keygenMs(kind: KeyKind): Promise<number> {
  const algorithm = kind === "rsa-2048"
    ? {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    }
    : { name: "ECDSA", namedCurve: "P-256" };
  const times: number[] = [];
  for (let i = 0; i < KEYGENS; i++) {
    const started = performance.now();
    await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return quantile(times, 0.5);
}

const deno = (globalThis as { Deno?: { version: { deno: string } } }).Deno;
const runtime = deno
  ? `Deno ${deno.version.deno}`
  : `Node ${(globalThis as unknown as { process: { version: string } }).process.version}`;

const result: TlsMintResult = {
  runtime,
  hosts: HOSTS,
  ecdsa: await mintTimes("ecdsa-p256", "ecdsa-p256", "ec"),
  ecdsaCaRsaLeaf: await mintTimes("ecdsa-p256", "rsa-2048", "ecrsa"),
  rsa: await mintTimes("rsa-2048", "rsa-2048", "rsa"),
  keygenEcdsaMs: await keygenMs("ecdsa-p256"),
  keygenRsaMs: await keygenMs("rsa-2048"),
};
console.log(JSON.stringify(result));
