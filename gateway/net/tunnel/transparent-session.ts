/**
 * A tunnel device's TCP connection, redirected to the transparent listener: the CONNECT path
 * without its HTTP front. The device's address names it and its project (the admission step the
 * plane gives, in place of credentials); its original destination is read back; the name comes
 * from the fake address the resolver gave, else from the client's first bytes (the TLS SNI or
 * the HTTP Host, read within the sniff timeout), else the address itself is the target. Then
 * admission's request steps (limits, the destination guard), the dial through the project's
 * pool with the device's options, and the relay, exactly as a CONNECT tunnel's (tunnel.ts),
 * metered alike. The device believes it talks to the origin, so it hears nothing from the
 * gateway itself: a refusal or a failure closes the connection. A connection closed as encrypted
 * DNS is counted by the plane (/metrics) and in the device's metering window (its history).
 */
import { EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import type { Client, MaybePromise, Refusal, Target } from "../../../shared/routing/contract.ts";
import { AdmissionStage, type ClientAddress } from "../../base/admission.ts";
import { RequestKind, RequestOutcome } from "../../base/metrics.ts";
import { safely } from "../../base/transfer-hooks.ts";
import { Leg, tuneTcp } from "../io/leg.ts";
import { ADMISSION_ERROR, AdmissionTicket, admitThrough } from "../session/admission-pipeline.ts";
import type {
  AttachedUpstream,
  InnerTunnel,
  InterceptSession,
  NetContext,
} from "../session/contract.ts";
import { endOfRun, SessionCancel } from "../session/lifecycle.ts";
import { interceptTunnel } from "../tls/intercept.ts";
import { ClientSession, InnerServing } from "../session/client-session.ts";
import type { TransparentPlane } from "./transparent-contract.ts";
import { nameIn } from "./sniff.ts";
import { dialTunnel, runTunnel } from "./tunnel.ts";

/** What a sniff reads at most: a ClientHello with its extensions, or a request head. */
const SNIFF_BYTES = 16 * 1024;
const KIND = RequestKind.device;

export class TransparentSession implements InterceptSession {
  readonly ctx: NetContext;
  readonly client: Leg;
  readonly openedMs = Date.now();
  slot = -1;
  readonly #plane: TransparentPlane;
  readonly #peer: Deno.NetAddr;
  readonly #cancellation = new SessionCancel();
  readonly #admission: AdmissionTicket;
  readonly #inside = new InnerServing();
  #upstream: AttachedUpstream | undefined;
  /** Bytes the sniff read, handed to the tunnel first. */
  #sniffed: Uint8Array = EMPTY_BYTES;
  #startedMs = 0;

  constructor(conn: Deno.Conn, ctx: NetContext, plane: TransparentPlane) {
    tuneTcp(conn);
    this.client = new Leg(conn);
    this.ctx = ctx;
    this.#plane = plane;
    this.#peer = conn.remoteAddr as Deno.NetAddr;
    this.#admission = new AdmissionTicket(this.#peer);
  }

  get signal(): AbortSignal {
    return this.#cancellation.signal;
  }

  get cancelled(): boolean {
    return this.#cancellation.cancelled;
  }

  get clientAddress(): ClientAddress {
    return this.#admission.clientAddress;
  }

  /** The device this connection came from (its tunnel address). */
  get deviceAddress(): string {
    return this.#peer.hostname;
  }

  run(): Promise<void> {
    return endOfRun(this.#serve(), () => this.#close(), this.ctx.logger, "Device session failed");
  }

  #close(): void {
    if (this.#startedMs !== 0) {
      this.ctx.metrics.requestDuration(KIND, performance.now() - this.#startedMs);
    }
    this.#admission.release();
    this.#upstream?.close();
    this.client.close();
  }

  cancel(): void {
    this.#cancellation.cancel();
    this.#inside.cancel();
    this.#upstream?.close();
    this.client.close();
  }

  /** A tunnel is exempt from the idle check, as CONNECT's; an intercepted one's requests are not. */
  checkIdle(nowMs: number, idleMs: number): void {
    this.#inside.checkIdle(nowMs, idleMs);
  }

  keepAlive(): void {
    this.client.keepAlive();
    this.#upstream?.keepAlive();
    this.#inside.keepAlive();
  }

  releaseAdmission(): void {
    this.#admission.release();
  }

  serveInner(conn: Deno.Conn, inner: InnerTunnel): Promise<void> {
    return this.#inside.serve(new ClientSession(conn, this.ctx, inner), this.cancelled);
  }

  attach(leg: AttachedUpstream | undefined): void {
    this.#upstream = leg;
  }

  takeForTunnel(): Uint8Array {
    this.#cancellation.release();
    const sniffed = this.#sniffed;
    this.#sniffed = EMPTY_BYTES;
    return sniffed;
  }

  async #serve(): Promise<void> {
    const ctx = this.ctx;
    const plane = this.#plane;
    this.#startedMs = performance.now();
    const ticket = this.#admission;
    ticket.begin("device", null, undefined);
    // Who: the device its address names (a device no longer admitted is cut here).
    const clientRefusal = await this.#admit(AdmissionStage.client);
    if (clientRefusal === ADMISSION_ERROR) return;
    if (clientRefusal !== undefined) return this.#refused(clientRefusal, undefined, undefined);

    const original = await plane.originalDestination(this.#peer);
    if (original === undefined) {
      ctx.metrics.request(KIND, RequestOutcome.failed, 500);
      return;
    }
    // The name the fake address stands for; else the one the first bytes carry; else the
    // address itself. A fake address no name holds any more is nowhere to go.
    const fake = plane.isFake(original.address);
    let host = fake ? await plane.nameOf(original.address) : undefined;
    let nameFrom: "fake_ip" | "sniffed" | "address" = "fake_ip";
    if (host === undefined) {
      host = await this.#sniff(plane.sniffTimeoutMs);
      nameFrom = "sniffed";
      if (host === undefined) {
        if (fake) {
          ctx.metrics.request(KIND, RequestOutcome.refused, 404);
          return;
        }
        host = original.address;
        nameFrom = "address";
      }
    }
    if (plane.closesEncryptedDns(this.#peer.hostname, host, original.port)) {
      // Counted in the device's own window too, so its history shows it.
      const hooks = ctx.hooks;
      const device = ticket.client;
      if (hooks?.encryptedDnsClosed && device) {
        safely(() => hooks.encryptedDnsClosed!(device));
      }
      ctx.metrics.request(KIND, RequestOutcome.refused, 403);
      return;
    }
    const target: Target = { host, port: original.port };
    ticket.target = target;
    const requestRefusal = await this.#admit(AdmissionStage.request);
    if (requestRefusal === ADMISSION_ERROR) return;
    if (requestRefusal !== undefined) return this.#refused(requestRefusal, ticket.client, target);
    const client: Client = ticket.client!;
    plane.routed(this.#peer.hostname, nameFrom);

    const mitm = ctx.mitm;
    if (mitm !== undefined && mitm.intercepts(client, target)) {
      return interceptTunnel(this, mitm, {
        client,
        target,
        dialTarget: ticket.dialTarget ?? target,
        credentials: null,
        established: EMPTY_BYTES,
        kind: KIND,
      });
    }
    const dial = await dialTunnel(this, client, target, KIND, ticket.dialTarget ?? target);
    switch (dial.kind) {
      case "refused":
        return this.#refused(dial.refusal, client, target);
      case "ended":
        return;
      case "failed":
        ctx.metrics.request(KIND, RequestOutcome.failed, dial.failure.answer.status);
        return;
      case "served":
        return runTunnel(this, {
          client,
          target,
          up: dial.value,
          established: EMPTY_BYTES,
          kind: KIND,
        });
    }
  }

  /**
   * The name the client's first bytes carry: a TLS ClientHello's server name, or an HTTP
   * request's Host (without its port); undefined when none came within `timeoutMs`. What was
   * read is kept for the tunnel, and a read still waiting when the time is up is left parked,
   * so no byte is lost.
   */
  async #sniff(timeoutMs: number): Promise<string | undefined> {
    const deadline = Date.now() + timeoutMs;
    const buffer = new Uint8Array(SNIFF_BYTES);
    let length = 0;
    let name: string | undefined;
    try {
      while (length < buffer.length) {
        const left = deadline - Date.now();
        if (left <= 0) break;
        const parked = this.client.park();
        let timer: ReturnType<typeof setTimeout> | undefined;
        const came = await Promise.race([
          parked.then(() => true),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), left))),
        ]);
        clearTimeout(timer);
        if (!came) break;
        const count = await this.client.read(buffer.subarray(length));
        if (count === null || count === 0) break;
        length += count;
        const found = nameIn(buffer.subarray(0, length));
        if (found !== "more") {
          name = found;
          break;
        }
      }
    } catch {
      // The client failed or left: the tunnel finds out.
    }
    this.#sniffed = buffer.slice(0, length);
    return name;
  }

  /** Admission's steps through `through`'s stage (admission-pipeline.ts `admitThrough`). */
  #admit(through: AdmissionStage): MaybePromise<Refusal | undefined | typeof ADMISSION_ERROR> {
    return admitThrough(this.ctx, this.#admission, through, KIND);
  }

  #refused(refusal: Refusal, client: Client | undefined, target: Target | undefined): void {
    const hooks = this.ctx.hooks;
    if (hooks?.rejected) safely(() => hooks.rejected!(refusal, client, target, KIND));
    this.ctx.metrics.request(
      KIND,
      refusal.status >= 500 ? RequestOutcome.failed : RequestOutcome.refused,
      refusal.status,
    );
  }
}
