/**
 * An SMTP server on 127.0.0.1 that keeps every message it takes (envelope, headers, text): the
 * least of the protocol a sender needs (EHLO, MAIL, RCPT, DATA, RSET, QUIT, no TLS, no login).
 * `rejects` answers the first messages' DATA with a temporary failure (451), one per entry.
 */
import { createServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export interface ReceivedMail {
  from: string;
  to: string[];
  /** Header names in lower case; a folded header's lines joined. */
  headers: Record<string, string>;
  text: string;
}

export interface SmtpReceiver {
  url: string;
  received: ReceivedMail[];
  close(): Promise<void>;
}

function parseMessage(data: string): { headers: Record<string, string>; text: string } {
  const split = data.indexOf("\r\n\r\n");
  const head = split < 0 ? data : data.slice(0, split);
  const text = split < 0 ? "" : data.slice(split + 4);
  const headers: Record<string, string> = {};
  let last = "";
  for (const line of head.split("\r\n")) {
    if (/^[ \t]/.test(line) && last !== "") {
      headers[last] = `${headers[last]} ${line.trim()}`.trim();
    } else {
      const at = line.indexOf(":");
      if (at <= 0) continue;
      last = line.slice(0, at).toLowerCase();
      headers[last] = line.slice(at + 1).trim();
    }
  }
  return { headers, text };
}

export async function startSmtpReceiver(rejects = 0): Promise<SmtpReceiver> {
  const received: ReceivedMail[] = [];
  let toReject = rejects;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let buffer = "";
    let inData = false;
    let from = "";
    let to: string[] = [];
    const reply = (line: string) => socket.write(`${line}\r\n`);
    reply("220 localhost test SMTP");
    socket.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("latin1");
      for (;;) {
        if (inData) {
          const end = buffer.indexOf("\r\n.\r\n");
          if (end < 0) return;
          const data = buffer.slice(0, end).replace(/\r\n\.\./g, "\r\n.");
          buffer = buffer.slice(end + 5);
          inData = false;
          if (toReject > 0) {
            toReject -= 1;
            reply("451 4.3.0 Try again later");
          } else {
            received.push({ from, to, ...parseMessage(data) });
            reply("250 2.0.0 Ok: queued");
          }
          from = "";
          to = [];
          continue;
        }
        const end = buffer.indexOf("\r\n");
        if (end < 0) return;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === "EHLO" || verb === "HELO") reply("250 localhost");
        else if (verb === "MAIL") {
          from = /<([^>]*)>/.exec(line)?.[1] ?? "";
          reply("250 2.1.0 Ok");
        } else if (verb === "RCPT") {
          to.push(/<([^>]*)>/.exec(line)?.[1] ?? "");
          reply("250 2.1.5 Ok");
        } else if (verb === "DATA") {
          inData = true;
          reply("354 End data with <CR><LF>.<CR><LF>");
        } else if (verb === "RSET" || verb === "NOOP") reply("250 2.0.0 Ok");
        else if (verb === "QUIT") {
          reply("221 2.0.0 Bye");
          socket.end();
        } else reply("502 5.5.2 Command not recognized");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
