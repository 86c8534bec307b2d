/** The Inspector's answers: a project's interception captures, newest first. */
import * as v from "valibot";
import { count, timestamp } from "./common.ts";

/** A header as captured: its name as sent, its value (secrets' values `[scrubbed]`). */
const header = v.tuple([v.string(), v.string()]);

/** One exchange inside an intercepted tunnel (shared/mitm-captures.ts). */
export const MitmCaptureAnswer = v.strictObject({
  /** The stream entry's id: what a cursor names. */
  id: v.string(),
  /** When the exchange ended. */
  at: timestamp,
  method: v.string(),
  /** The target's `host:port`. */
  host: v.string(),
  /** The path, its query replaced by `?…` when it had one. */
  path: v.string(),
  /** The status the client got (the target's, or the gateway's own; 0: none). */
  status: count,
  /** The gateway's own answer's Proxy-Status token; "" when the target answered. */
  proxy_status: v.string(),
  /** From the request's head to the answer's first byte; null when none came. */
  first_byte_ms: v.nullable(count),
  /** From the request's head to the answer's end. */
  total_ms: count,
  connector_id: v.nullable(v.string()),
  /** The connector's name; null when none served it or it is gone. */
  connector_name: v.nullable(v.string()),
  proxy_id: v.nullable(v.string()),
  /** The proxy's `host:port`, never its login; null when none served it or it is gone. */
  proxy_address: v.nullable(v.string()),
  /** Request bytes sent upstream. */
  bytes_up: count,
  /** Answer bytes relayed to the client. */
  bytes_down: count,
  /** The client's request headers as it sent them. */
  request_headers: v.array(header),
  /** The headers the target got (after the gateway's rewrite). */
  sent_headers: v.array(header),
  /** The answer's headers. */
  response_headers: v.array(header),
  /** The client's TLS ClientHello as JA3 (its MD5) and JA4, and the name it asked for. */
  ja3: v.string(),
  ja4: v.string(),
  sni: v.string(),
  /** The upstream side's HTTP/2 fingerprint ("" unless a browser-grade mode made one). */
  http2: v.string(),
  /** How the gateway's side towards the target was made (`plain`). */
  mode: v.string(),
});
export type MitmCaptureItem = v.InferOutput<typeof MitmCaptureAnswer>;

export const MitmCapturesAnswer = v.strictObject({
  items: v.array(MitmCaptureAnswer),
  /** Pass as `cursor` for the next, older page; null at the end. */
  next_cursor: v.nullable(v.string()),
});
export type MitmCapturesPage = v.InferOutput<typeof MitmCapturesAnswer>;
