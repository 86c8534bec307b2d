import type { Row } from "../bench/suite.ts";
import type { OverloadContext } from "./context.ts";
export function overloadWorker(_context: OverloadContext): Promise<Row[]> {
  return Promise.resolve([]);
}
