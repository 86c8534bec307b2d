/**
 * The throughput benchmark's proxy-chain peer: proxy-chain's `Server` (the Node library
 * scrapers use to chain to an upstream proxy) configured as a user would put it in front of
 * one upstream: every request must carry Basic auth with the given login, and goes on through
 * `--upstream host:port` (forward requests and CONNECT tunnels alike).
 *
 *   node --import tsx scripts/bench/proxy-chain-peer.ts --upstream 127.0.0.1:PORT \
 *     --login user:pass
 *
 * It prints `{"port": N}` once listening on a free loopback port.
 */
import { parseArgs } from "node:util";
import { Server } from "proxy-chain";

const { values } = parseArgs({
  options: { upstream: { type: "string" }, login: { type: "string" } },
});
if (!values.upstream || !values.login) {
  throw new Error("usage: proxy-chain-peer.ts --upstream host:port --login user:pass");
}
const colon = values.login.indexOf(":");
const [username, password] = [values.login.slice(0, colon), values.login.slice(colon + 1)];
const upstreamProxyUrl = `http://${values.upstream}`;

const server = new Server({
  host: "127.0.0.1",
  port: 0,
  verbose: false,
  prepareRequestFunction: (request) =>
    request.username === username && request.password === password
      ? { upstreamProxyUrl }
      : { requestAuthentication: true },
});
await server.listen();
console.log(JSON.stringify({ port: server.port }));
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => void server.close(true).then(() => process.exit(0)));
}
