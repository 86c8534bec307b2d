/**
 * Suite `tls-ca`: host certificates for TLS interception, minted as a gateway mints them (Deno)
 * over the one leaf key made when the CA loads (shared/tls/ca.ts). Budget: a certificate for a
 * new host within 2 ms at p99 with ECDSA P-256 (issue 32); the RSA 2048 figures beside it, and
 * what making a key per host would cost, which the one key avoids. Each run is a fresh process
 * (tls-mint.ts): 2,000 distinct hosts per pair of keys after 200 to warm up. BENCH_TLS_RUNTIME=node
 * runs the same under Node.
 */
import { entryRuntime, runEntry } from "./runtime.ts";
import { formatNumber, median, type Row, type Suite, type SuiteContext } from "./suite.ts";
import type { MintFigures, TlsMintResult } from "./tls-mint.ts";

const MINT_P99_BUDGET_MS = 2;

async function run(context: SuiteContext): Promise<Row[]> {
  const runtime = entryRuntime("BENCH_TLS_RUNTIME");
  const results: TlsMintResult[] = [];
  for (let i = 0; i < context.runs; i++) {
    const result = await runEntry<TlsMintResult>(runtime, "tls-mint.ts");
    results.push(result);
    context.log(
      `tls-ca: run ${i + 1}: p99 ECDSA ${result.ecdsa.p99Ms.toFixed(2)} ms, ECDSA CA over an ` +
        `RSA leaf key ${result.ecdsaCaRsaLeaf.p99Ms.toFixed(2)} ms, RSA ${
          result.rsa.p99Ms.toFixed(2)
        } ms`,
    );
  }
  const who = `${results[0].runtime}, ${formatNumber(results[0].hosts, 0)} new hosts a run`;
  const mintRow = (
    pick: (r: TlsMintResult) => MintFigures,
    figure: string,
    key: string,
    budgeted: boolean,
  ): Row => ({
    figure: `${figure} (${who})`,
    key,
    value: median(results.map((r) => pick(r).p99Ms)),
    runs: results.map((r) => pick(r).p99Ms),
    unit: "ms",
    digits: 2,
    ...(budgeted ? { budget: { op: "<=" as const, limit: MINT_P99_BUDGET_MS } } : {}),
    detail: `p50 ${formatNumber(median(results.map((r) => pick(r).p50Ms)), 2)} ms, max ${
      formatNumber(median(results.map((r) => pick(r).maxMs)), 2)
    } ms`,
  });
  return [
    mintRow(
      (r) => r.ecdsa,
      "Host certificate for a new host, p99: ECDSA P-256 CA and leaf key",
      "tls-mint-ecdsa-p99",
      true,
    ),
    mintRow(
      (r) => r.ecdsaCaRsaLeaf,
      "Host certificate for a new host, p99: ECDSA P-256 CA, RSA 2048 leaf key",
      "tls-mint-ecdsa-ca-rsa-leaf-p99",
      false,
    ),
    mintRow(
      (r) => r.rsa,
      "Host certificate for a new host, p99: RSA 2048 CA and leaf key",
      "tls-mint-rsa-p99",
      false,
    ),
    {
      figure: "Making one RSA 2048 key pair (what a key per host would add to each new host)",
      value: median(results.map((r) => r.keygenRsaMs)),
      runs: results.map((r) => r.keygenRsaMs),
      unit: "ms",
      digits: 1,
      detail: `ECDSA P-256: ${formatNumber(median(results.map((r) => r.keygenEcdsaMs)), 2)} ms`,
    },
  ];
}

export const tlsCaSuite: Suite = {
  name: "tls-ca",
  description: "TLS interception: host certificates minted over the one key (ECDSA and RSA)",
  run,
};
