/**
 * One logger shape for every line: JSON with time, level, msg, the process (instance, role) and,
 * inside a request, its request id. The request context travels in AsyncLocalStorage, so code
 * deep in a service logs with the request id without being handed it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import pino from "pino";

export type Logger = pino.Logger;

export interface RequestContext {
  requestId: string;
  userId?: string;
  username?: string;
}

export const requestContext: AsyncLocalStorage<RequestContext> = new AsyncLocalStorage<
  RequestContext
>();

/** Fields that may hold a secret, wherever a caller put them. */
const REDACT = [
  "password",
  "*.password",
  "token",
  "*.token",
  "access_token",
  "*.access_token",
  "secret",
  "*.secret",
  "authorization",
  "*.authorization",
  "headers.authorization",
  'headers["proxy-authorization"]',
  "databaseUrl",
  "redisUrl",
];

export interface LoggerOptions {
  level: string;
  instance: string;
  role: string;
  /** Where lines go; standard output by default. */
  destination?: pino.DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { instance: options.instance, role: options.role },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      messageKey: "msg",
      redact: { paths: REDACT, censor: "[redacted]" },
      mixin() {
        const context = requestContext.getStore();
        if (!context) return {};
        return {
          request_id: context.requestId,
          ...(context.userId ? { user_id: context.userId } : {}),
          ...(context.username ? { username: context.username } : {}),
        };
      },
    },
    options.destination ?? pino.destination({ sync: false }),
  );
}

/** A URL with its password replaced, for the rare line that must name a store. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "[unparseable url]";
  }
}
