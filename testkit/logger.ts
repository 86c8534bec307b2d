/**
 * A real pino logger whose lines tests can read: every line is parsed and kept in `lines`.
 */
import { Writable } from "node:stream";
import { createLogger, type Logger } from "../control/core/logging.ts";

export interface CapturedLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export function captureLogger(role = "test"): { logger: Logger; lines: CapturedLine[] } {
  const lines: CapturedLine[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const text of chunk.toString("utf8").split("\n")) {
        if (text.trim() !== "") lines.push(JSON.parse(text) as CapturedLine);
      }
      callback();
    },
  });
  const logger = createLogger({ level: "debug", instance: "test", role, destination });
  return { logger, lines };
}
