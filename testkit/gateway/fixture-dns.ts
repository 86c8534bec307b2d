/**
 * The tunnel resolver's fixture entry (testkit/gateway/fixture/dns.ts) as a process: started,
 * its port read from its first line, stopped with SIGTERM and its metric samples read back.
 */
import type { MetricSample } from "../../gateway/base/metrics.ts";
import { waitUntil } from "../wait.ts";
import { collectLogLines, gatewayEnv, type LogLine, spawnDeno } from "./fixture-gateway.ts";

export interface FixtureDns {
  readonly port: number;
  readonly pid: number;
  /** SIGTERM, then the samples it printed as it stopped. */
  stop(): Promise<{ samples: MetricSample[]; dropped: number }>;
}

export async function startFixtureDns(options: {
  redisUrl: string;
  prefix: string;
  redisToken?: string;
  range?: string;
  blockEncryptedDns?: boolean;
}): Promise<FixtureDns> {
  const child = spawnDeno(
    "testkit/gateway/fixture/dns.ts",
    gatewayEnv({
      FIXTURE_REDIS_URL: options.redisUrl,
      OCTOPROX_REDIS_PREFIX: options.prefix,
      ...(options.redisToken === undefined ? {} : { OCTOPROX_REDIS_TOKEN: options.redisToken }),
      ...(options.range === undefined ? {} : { FIXTURE_FAKE_IP_RANGE: options.range }),
      FIXTURE_BLOCK_ENCRYPTED_DNS: options.blockEncryptedDns === false ? "0" : "1",
    }),
  );
  const lines: LogLine[] = [];
  let stderr = "";
  collectLogLines(child.stdout!, lines);
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (text: string) => {
    stderr += text;
  });
  const listening = await waitUntil(() => {
    if (child.exitCode !== null) throw new Error(`the resolver exited: ${stderr}`);
    return lines.find((line) => line.msg === "dns listening");
  }, { timeoutMs: 20_000, message: "the fixture resolver to listen" });
  return {
    port: Number(listening.port),
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      const stopped = await waitUntil(() => lines.find((line) => line.msg === "dns stopped"), {
        timeoutMs: 10_000,
        message: `the fixture resolver to stop (${stderr})`,
      });
      return {
        samples: stopped.samples as MetricSample[],
        dropped: Number(stopped.dropped),
      };
    },
  };
}
