/**
 * CONNECT tunnels of the HTTP listener: admission (credentials, destination), then the tunnel
 * (tunnel.ts): dial through an upstream, another proxy while the tunnel is not up, then
 * `200 Connection established` and the relay until the tunnel ends.
 */
import type { Target } from "../../../shared/routing/contract.ts";
import { CONNECTION_ESTABLISHED } from "../http/answers.ts";
import {
  clientKeepsAlive,
  HeadError,
  headerValue,
  parseConnectTarget,
  type RequestHead,
} from "../http/parse.ts";
import { RequestKind } from "../../base/metrics.ts";
import type { HttpSession, TunnelRunning } from "../session/contract.ts";
import { dialTunnel, runTunnel } from "./tunnel.ts";
import { interceptTunnel } from "../tls/intercept.ts";

/**
 * Handles one CONNECT; resolves whether the client's connection serves another request, or, once
 * its tunnel is up, with the running tunnel.
 */
export async function handleConnect(
  session: HttpSession,
  head: RequestHead,
): Promise<boolean | TunnelRunning> {
  const kind = RequestKind.connect;
  const method = head.method;
  let target: Target;
  try {
    target = parseConnectTarget(head.target);
  } catch (error) {
    const reason = error instanceof HeadError ? error.message : "Bad CONNECT target";
    await session.answer(
      { status: 400, proxyStatus: "http_request_error", reason },
      { keepAlive: false, kind, method },
    );
    return false;
  }
  // A CONNECT has no body: a refused one leaves the connection usable.
  const keepAfterRefusal = clientKeepsAlive(head);
  // Read before admission, which lets go of the head: an intercepted tunnel's requests are
  // admitted with them.
  const credentials = headerValue(head, "proxy-authorization");
  let client = session.admit(head, kind, keepAfterRefusal, target);
  if (client instanceof Promise) client = await client;
  if (client === undefined) return keepAfterRefusal;

  const mitm = session.ctx.mitm;
  if (mitm !== undefined && mitm.intercepts(client, target)) {
    return {
      ended: interceptTunnel(session, mitm, {
        client,
        target,
        dialTarget: session.dialTarget ?? target,
        credentials,
        established: CONNECTION_ESTABLISHED,
        kind,
      }),
    };
  }

  const dial = await dialTunnel(session, client, target, kind, session.dialTarget ?? target);
  switch (dial.kind) {
    case "refused":
      await session.refuse(
        dial.refusal,
        { keepAlive: keepAfterRefusal, kind, method },
        client,
        target,
      );
      return keepAfterRefusal;
    case "ended":
      return false;
    case "failed":
      await session.answer(dial.failure.answer, { keepAlive: keepAfterRefusal, kind, method });
      return keepAfterRefusal && !session.client.closed;
    case "served":
      return {
        ended: runTunnel(session, {
          client,
          target,
          up: dial.value,
          established: CONNECTION_ESTABLISHED,
          kind,
        }),
      };
  }
}
