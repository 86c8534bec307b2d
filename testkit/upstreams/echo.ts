/**
 * An echo endpoint the test controls, in place of the api's /echo: `GET /echo` answers
 * `{"ip": ...}` while up, and 500 while `down` (an outage the workers must tell apart from
 * failing proxies). Counts the requests it got, through proxies or directly. With `country` it
 * also places every caller there, as the api's echo answers where its databases place one.
 */
import http from "node:http";
import type net from "node:net";
import { plainAddress } from "./origin.ts";

export interface Echo {
  readonly url: string;
  /** Requests answered so far, by the address they came from. */
  readonly requests: ReadonlyMap<string, number>;
  setUp(up: boolean): void;
  close(): Promise<void>;
}

/** `host`: the address it listens on, 127.0.0.1 unless told. */
export async function startEcho(
  options: { host?: string; country?: string } = {},
): Promise<Echo> {
  const host = options.host ?? "127.0.0.1";
  let up = true;
  const requests = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const ip = plainAddress(request.socket.remoteAddress);
    requests.set(ip, (requests.get(ip) ?? 0) + 1);
    const placed = options.country === undefined ? {} : { country: options.country };
    const body = JSON.stringify(up ? { ip, ...placed } : { error: "echo down" });
    response.writeHead(up ? 200 : 500, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    response.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://${host}:${port}/echo`,
    requests,
    setUp(next: boolean) {
      up = next;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
