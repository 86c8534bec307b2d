/**
 * A forwarded request's plan, as every attempt at it needs it (the two exchanges, the retry
 * loop's judging): a contract of its own, since forward.ts builds it and exchange.ts,
 * browser-exchange.ts and judging.ts read it.
 */
import type { CompiledRule } from "../../../shared/blocking/rules.ts";
import type { AttemptPlan } from "../session/attempts.ts";
import type { CaptureDraft } from "../tls/capture.ts";
import type { Persona } from "../tls/impersonation.ts";
import type { ForwardTarget, RequestFraming, RequestHead } from "./parse.ts";

/** A forwarded request, as every attempt at it needs it. */
export interface ForwardPlan extends AttemptPlan {
  head: RequestHead;
  target: ForwardTarget;
  framing: RequestFraming;
  /** The client asked to keep its connection (its Connection fields and version). */
  clientKeeps: boolean;
  expectsContinue: boolean;
  /** Inside an intercepted tunnel: what the Inspector's capture of the request collects. */
  capture?: CaptureDraft;
  /**
   * Inside an intercepted tunnel of a browser-grade project: the browser it goes out as
   * (browser-exchange.ts runs its attempts instead of exchange.ts).
   */
  persona?: Persona;
  /** The project's block rules for the target's host: each answer is judged before it is sent. */
  judging?: Judging;
}

/** What judging a forwarded request's answers takes (forward.ts builds it). */
export interface Judging {
  rules: readonly CompiledRule[];
  readsBody: boolean;
  /** How much of a body the markers are looked for in. */
  bodyBytes: number;
  /** The target's site: what a verdict cools its exit down for. */
  site: string;
  /**
   * The request's body is kept for a resend (a method with a body the project retries): the
   * bytes as the client sent them, undefined once past RETRY_BODY_MAX_BYTES.
   */
  keptBody?: Uint8Array[] | undefined;
  keptBytes: number;
}
