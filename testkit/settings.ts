/**
 * Control settings for in-process tests, parsed by the real schema from an environment the test
 * describes, so a test runs on exactly what a process would.
 */
import { type ControlSettings, parseControlSettings } from "../shared/settings.ts";
import { TEST_REDIS_URL, testSecrets } from "./stores.ts";

export function testSettings(
  env:
    & { databaseUrl?: string; redisUrl?: string; prefix: string }
    & Record<string, string | undefined>,
): ControlSettings {
  const secrets = testSecrets();
  const { databaseUrl, redisUrl, prefix, ...rest } = env;
  return parseControlSettings({
    OCTOPROX_DATABASE_URL: databaseUrl ?? "postgres://postgres@127.0.0.1:5432/unused",
    OCTOPROX_REDIS_URL: redisUrl ?? TEST_REDIS_URL,
    OCTOPROX_REDIS_PREFIX: prefix,
    OCTOPROX_INTERNAL_SECRET: secrets.internal,
    OCTOPROX_JWT_SECRET: secrets.jwt,
    OCTOPROX_LOG_LEVEL: "debug",
    ...rest,
  });
}
