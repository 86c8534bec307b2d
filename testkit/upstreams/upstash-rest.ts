/**
 * A stand-in for Upstash's Redis REST API, in front of a real Redis: what `@upstash/redis` speaks,
 * so tests can run Redis traffic over HTTP without the hosted service.
 *
 * - `Authorization: Bearer <token>` (or the `_token` query parameter) is required: 401
 *   `{"error":"Unauthorized"}` otherwise.
 * - `POST /` with a JSON array body runs one command: `{"result": …}`, or 400 `{"error": …}`
 *   when Redis (or this server) refuses it.
 * - The path form: `/set/k/v` (HEAD, GET, POST or PUT); a POST's body is appended as the last
 *   argument and query parameters after it (`/set/k?EX=100` with body `v`).
 * - `POST /pipeline`: a JSON array of commands, answered as an array of `{"result"}` /
 *   `{"error"}` in order, not atomic (other clients' commands may interleave).
 * - `POST /multi-exec`: the same inside MULTI/EXEC. An error at run time (WRONGTYPE…) is that
 *   item's `{"error"}`, the others applied, as Redis does; an error at queue time (unknown
 *   command, wrong arity) discards the whole transaction: 400 `{"error":"EXECABORT …"}`.
 * - `Upstash-Encoding: base64`: every string in the result, at any depth, is base64 of its bytes,
 *   except a bare `OK`, as Upstash documents (the client decodes "OK" as is).
 * - Blocking and connection-bound commands (BLPOP…, XREAD/XREADGROUP with BLOCK, SUBSCRIBE,
 *   MULTI/EXEC/WATCH sent raw…) are refused with 400, as Upstash's REST API does not run them.
 * - EVAL / EVALSHA / SCRIPT pass through (a NOSCRIPT error reads as Redis words it).
 */
import http from "node:http";
import type net from "node:net";
import { Redis } from "ioredis";
import { freePort } from "../ports.ts";

export interface UpstashRest {
  /** `http://127.0.0.1:<port>`, for the client's `url`. */
  readonly url: string;
  readonly port: number;
  readonly token: string;
  /** Requests received so far (answered or not, authorized or not), by route: `/`,
   * `/pipeline`, `/multi-exec`, or `/<command>` for the path form. */
  readonly requests: Readonly<Record<string, number>>;
  /** All requests received so far. */
  readonly total: number;
  /** While on, requests are held unanswered (an unresponsive server); turning it off answers
   * the held ones. */
  pause(on: boolean): void;
  /** Closes the listener and every connection (held requests dropped), then listens again on
   * the same port. */
  restart(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

type Arg = string | number | boolean | null;
type Reply = { result: unknown } | { error: string };

/** Commands Upstash's REST API does not serve: blocking ones, and ones bound to a connection. */
const BLOCKING = new Set([
  "blpop",
  "brpop",
  "brpoplpush",
  "blmove",
  "blmpop",
  "bzpopmin",
  "bzpopmax",
  "bzmpop",
  "wait",
  "waitaof",
]);
const CONNECTION_BOUND = new Set([
  "subscribe",
  "psubscribe",
  "ssubscribe",
  "unsubscribe",
  "punsubscribe",
  "sunsubscribe",
  "monitor",
  "sync",
  "psync",
  "multi",
  "exec",
  "discard",
  "watch",
  "unwatch",
  "quit",
  "reset",
  "select",
  "client",
  "hello",
  "auth",
]);

/** Why a command is refused before Redis sees it, or undefined. */
function refusal(command: Arg[]): string | undefined {
  const name = String(command[0] ?? "").toLowerCase();
  if (BLOCKING.has(name)) return `ERR Command is not available: '${name}'`;
  if (CONNECTION_BOUND.has(name)) return `ERR Command is not available: '${name}'`;
  if (
    (name === "xread" || name === "xreadgroup") &&
    command.some((a) => String(a).toLowerCase() === "block")
  ) {
    return `ERR Command is not available: '${name}' with BLOCK`;
  }
  return undefined;
}

function isCommand(value: unknown): value is Arg[] {
  return Array.isArray(value) && value.length > 0 &&
    value.every((v) =>
      v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean"
    ) && typeof value[0] === "string";
}

/** A Redis reply (Buffers from ioredis's buffer calls) as JSON, strings encoded as asked. */
function toJson(value: unknown, base64: boolean): unknown {
  if (Buffer.isBuffer(value)) {
    const text = value.toString("utf8");
    if (!base64 || text === "OK") return text;
    return value.toString("base64");
  }
  if (typeof value === "string") {
    return base64 && value !== "OK" ? Buffer.from(value).toString("base64") : value;
  }
  if (Array.isArray(value)) return value.map((v) => toJson(v, base64));
  if (value instanceof Error) return value.message;
  return value ?? null;
}

/** The command's name upper-cased: ioredis reshapes some replies (HGETALL into an object) and
 * arguments by their lower-case names, and this server answers Redis's own shapes. */
function name(command: Arg[]): string {
  return String(command[0]).toUpperCase();
}

function args(command: Arg[]): (string | Buffer)[] {
  return command.slice(1).map((a) => (Buffer.isBuffer(a) ? a : String(a)));
}

export async function startUpstashRest(
  options: { redisUrl: string; token: string; port?: number },
): Promise<UpstashRest> {
  const host = "127.0.0.1";
  const port = options.port ?? await freePort(host);
  const redis = new Redis(options.redisUrl, {
    // RESP2, the reply shapes Upstash answers (RESP3 maps would come flattened otherwise).
    protocol: 2,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
  });
  redis.on("error", () => {}); // a stopped Redis answers each command's error instead
  await redis.connect();

  const requests: Record<string, number> = {};
  let total = 0;
  let paused = false;
  let held: (() => void)[] = [];
  const sockets = new Set<net.Socket>();

  async function run(command: Arg[], base64: boolean): Promise<Reply> {
    const refused = refusal(command);
    if (refused) return { error: refused };
    try {
      const result = await redis.callBuffer(name(command), args(command));
      return { result: toJson(result, base64) };
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  }

  async function pipeline(commands: Arg[][], base64: boolean): Promise<Reply[]> {
    // One connection sends them in order; others' commands may come between (not atomic).
    return await Promise.all(commands.map((command) => run(command, base64)));
  }

  async function multiExec(
    commands: Arg[][],
    base64: boolean,
  ): Promise<{ status: number; body: unknown }> {
    const refused = commands.map(refusal).find((r) => r !== undefined);
    if (refused) return { status: 400, body: { error: refused } };
    const transaction = redis.multi();
    for (const command of commands) transaction.callBuffer(name(command), args(command));
    try {
      const results = await transaction.exec();
      if (results === null) return { status: 400, body: { error: "EXECABORT watched key" } };
      return {
        status: 200,
        body: results.map(([error, result]) =>
          error ? { error: error.message } : { result: toJson(result, base64) }
        ),
      };
    } catch (error) {
      return { status: 400, body: { error: error instanceof Error ? error.message : "ERR" } };
    }
  }

  function send(response: http.ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
    });
    response.end(text);
  }

  async function answer(
    request: http.IncomingMessage,
    response: http.ServerResponse,
    url: URL,
    raw: Buffer,
  ): Promise<void> {
    const auth = request.headers.authorization ?? "";
    const bearer = /^Bearer\s+(.+)$/i.exec(auth)?.[1] ?? url.searchParams.get("_token");
    if (bearer !== options.token) return send(response, 401, { error: "Unauthorized" });
    const method = request.method ?? "GET";
    if (!["HEAD", "GET", "POST", "PUT"].includes(method)) {
      return send(response, 405, { error: "Method Not Allowed" });
    }
    const base64 = String(request.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
    const segments = url.pathname.split("/").filter((s) => s !== "").map(decodeURIComponent);

    if (segments.length === 0 || segments[0] === "pipeline" || segments[0] === "multi-exec") {
      let body: unknown;
      try {
        body = JSON.parse(raw.toString("utf8"));
      } catch {
        return send(response, 400, { error: "ERR failed to parse command" });
      }
      if (segments.length === 0) {
        if (!isCommand(body)) return send(response, 400, { error: "ERR failed to parse command" });
        const reply = await run(body, base64);
        return send(response, "error" in reply ? 400 : 200, reply);
      }
      if (!Array.isArray(body) || body.length === 0 || !body.every(isCommand)) {
        return send(response, 400, { error: "ERR failed to parse pipeline request" });
      }
      if (segments[0] === "pipeline") return send(response, 200, await pipeline(body, base64));
      const { status, body: answered } = await multiExec(body, base64);
      return send(response, status, answered);
    }

    // The path form: /command/arg1/…, a POST's body as the last argument, then the query.
    const command: (Arg | Buffer)[] = [...segments];
    if ((method === "POST" || method === "PUT") && raw.length > 0) command.push(raw);
    for (const [name, value] of url.searchParams) {
      if (name === "_token") continue;
      command.push(name);
      if (value !== "") command.push(value);
    }
    const reply = await run(command as Arg[], base64);
    return send(response, "error" in reply ? 400 : 200, reply);
  }

  function route(pathname: string): string {
    const first = pathname.split("/").filter((s) => s !== "")[0];
    if (first === undefined) return "/";
    return `/${first === "pipeline" || first === "multi-exec" ? first : first.toLowerCase()}`;
  }

  const handler: http.RequestListener = (request, response) => {
    const url = new URL(request.url ?? "/", `http://${host}`);
    const key = route(url.pathname);
    requests[key] = (requests[key] ?? 0) + 1;
    total++;
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const go = () => {
        answer(request, response, url, Buffer.concat(chunks)).catch((error) => {
          if (!response.headersSent) send(response, 500, { error: String(error) });
        });
      };
      if (paused) held.push(go);
      else go();
    });
  };

  let server: http.Server | undefined;
  async function listen(): Promise<void> {
    const next = http.createServer(handler);
    next.on("connection", (socket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      next.once("error", reject);
      next.listen({ port, host }, () => {
        next.off("error", reject);
        resolve();
      });
    });
    server = next;
  }
  async function stop(): Promise<void> {
    const current = server;
    server = undefined;
    held = [];
    if (!current) return;
    const closed = new Promise<void>((resolve) => current.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    await closed;
  }

  await listen();
  let closed = false;
  return {
    url: `http://${host}:${port}`,
    port,
    token: options.token,
    requests,
    get total() {
      return total;
    },
    pause(on: boolean) {
      paused = on;
      if (!on) {
        const release = held;
        held = [];
        for (const go of release) go();
      }
    },
    async restart() {
      if (closed) throw new Error("upstash-rest: restart after close");
      await stop();
      await listen();
    },
    async close() {
      if (closed) return;
      closed = true;
      paused = false;
      await stop();
      redis.disconnect();
    },
  };
}
