/**
 * What an intercepted request's capture collects while its attempts run (the exchange fills in
 * the exit, the headers sent, the answer's head and the bytes), finished once its final answer is
 * known (http/forward.ts) and handed to the hooks for the Inspector (metering/mitm-captures.ts).
 * Only requests inside intercepted tunnels build one.
 */
import {
  type CapturedHeader,
  captureHeaders,
  capturePath,
  type MitmCapture,
} from "../../../shared/mitm-captures.ts";
import type { UpstreamChoice } from "../../../shared/routing/contract.ts";
import type { TransferMeter } from "../../base/transfer-hooks.ts";
import { parseRequestHead, type RequestHead } from "../http/parse.ts";
import type { TlsFingerprints } from "./fingerprints.ts";

export class CaptureDraft {
  readonly startedMs = performance.now();
  readonly head: RequestHead;
  proxyId: string | null = null;
  connectorId: string | null = null;
  firstByteMs: number | null = null;
  bytesUp = 0;
  bytesDown = 0;
  sentHeaders: CapturedHeader[] = [];
  responseHeaders: CapturedHeader[] = [];

  constructor(head: RequestHead) {
    this.head = head;
  }

  /** An attempt through `upstream` sends `requestHead` (the last attempt's is what is kept). */
  attempt(upstream: UpstreamChoice, requestHead: Uint8Array): void {
    this.proxyId = upstream.proxyId;
    this.connectorId = upstream.connectorId;
    // The head as it went, parsed back by the one request-head parser (a capture is a sample);
    // a capture never fails the request it describes.
    try {
      this.sentHeaders = captureHeaders(parseRequestHead(requestHead).headers);
    } catch {
      this.sentHeaders = [];
    }
    this.responseHeaders = [];
    this.firstByteMs = null;
  }

  /** An attempt through `upstream` by the browser-grade engine, sending `fields`. */
  attemptFields(upstream: UpstreamChoice, fields: readonly [string, string][]): void {
    this.proxyId = upstream.proxyId;
    this.connectorId = upstream.connectorId;
    this.sentHeaders = captureHeaders(
      fields.map(([name, value]) => ({ name, lower: name.toLowerCase(), value })),
    );
    this.responseHeaders = [];
    this.firstByteMs = null;
  }

  /** The target answered: its head. */
  answered(headers: readonly { name: string; value: string }[]): void {
    this.firstByteMs = performance.now() - this.startedMs;
    this.responseHeaders = captureHeaders(headers);
  }

  /** A meter that counts the bytes here too (and passes them on to metering's, if any). */
  meter(inner: TransferMeter | undefined): TransferMeter {
    return {
      bytes: (toUpstreamBytes, toClientBytes) => {
        this.bytesUp += toUpstreamBytes;
        this.bytesDown += toClientBytes;
        inner?.bytes(toUpstreamBytes, toClientBytes);
      },
      finish: (outcome, failure) => inner?.finish(outcome, failure),
    };
  }

  finish(
    target: { authority: string; path: string },
    answer: { status: number; proxyStatus: string },
    tls: { fingerprints: TlsFingerprints; sni: string | undefined },
    upstream: { mode: string; http2: string } = { mode: "plain", http2: "" },
  ): MitmCapture {
    return {
      atMs: Date.now(),
      method: this.head.method,
      host: target.authority,
      path: capturePath(target.path),
      status: answer.status,
      proxyStatus: answer.proxyStatus,
      firstByteMs: this.firstByteMs,
      totalMs: performance.now() - this.startedMs,
      connectorId: this.connectorId,
      proxyId: this.proxyId,
      bytesUp: this.bytesUp,
      bytesDown: this.bytesDown,
      requestHeaders: captureHeaders(this.head.headers),
      sentHeaders: this.sentHeaders,
      responseHeaders: this.responseHeaders,
      ja3: tls.fingerprints.ja3,
      ja4: tls.fingerprints.ja4,
      sni: tls.sni ?? "",
      http2: upstream.http2,
      mode: upstream.mode,
    };
  }
}
