/**
 * An HTTP receiver of alert deliveries on 127.0.0.1: it keeps every request (headers and body)
 * and answers each with the next status of its script, then 200. A test says `[500, 500]` for a
 * receiver that fails twice before it takes a delivery.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status it was answered. */
  status: number;
  // deno-lint-ignore no-explicit-any -- tests read the delivery's fields freely.
  json: any;
}

export interface WebhookReceiver {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

export async function startWebhookReceiver(
  script: readonly number[] = [],
): Promise<WebhookReceiver> {
  const statuses = [...script];
  const received: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const status = statuses.shift() ?? 200;
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      received.push({ headers: request.headers, body, status, json });
      response.writeHead(status, { "content-type": "text/plain" }).end(String(status));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
