/**
 * The admission steps, and the one list of them every listener runs, in order: who the client
 * is (its credentials, or its address for a password-less one), the routing core's own steps,
 * then where it may go (the destination guard). A new step is written against admission.ts.
 * One that needs the core's state (the snapshot's projects, shared counts) is built with the
 * core (app/isolate-core.ts `buildIsolateCore`, in every isolate) and listed in its
 * `admissionSteps`, in this order: checks of the client's address (which projects may be used
 * from where, gateway/access/client-address.ts) and the options its headers ask for
 * (access/header-options.ts), then project limits (rates, concurrent connections, quotas), so
 * that a request refused for where it comes from counts against nothing, and one refused for a
 * limit never resolves a name.
 */
import type {
  AuthResult,
  DestinationGuard,
  Refusal,
  Router,
  Target,
} from "../../../shared/routing/contract.ts";
import type { MaybePromise } from "../../../shared/routing/contract.ts";
import {
  type AdmissionRequest,
  AdmissionStage,
  type AdmissionStep,
  type AdmissionVerdict,
} from "../../base/admission.ts";

function authenticated(request: AdmissionRequest, auth: AuthResult): Refusal | undefined {
  if (!auth.ok) return auth.refusal;
  request.client = auth.client;
  return undefined;
}

/**
 * The client's credentials (the Proxy-Authorization value offered) and its username options,
 * as the router reads them, or without credentials the project whose password-less blocks hold
 * the client's address: sets `request.client`, or refuses with 407 (or 400 for an option
 * written wrong).
 */
export function credentialsStep(router: Pick<Router, "authenticate">): AdmissionStep {
  return {
    name: "credentials",
    stage: AdmissionStage.client,
    admit(request: AdmissionRequest): MaybePromise<AdmissionVerdict> {
      const auth = router.authenticate(request.credentials, request.clientIp);
      return auth instanceof Promise
        ? auth.then((settled) => authenticated(request, settled))
        : authenticated(request, auth);
    },
  };
}

function pinned(request: AdmissionRequest, verdict: Refusal | Target): Refusal | undefined {
  if (isTargetOnly(verdict)) {
    request.dialTarget = verdict;
    return undefined;
  }
  return verdict;
}

function isTargetOnly(verdict: Refusal | Target): verdict is Target {
  return (verdict as Partial<Refusal>).status === undefined;
}

/**
 * The destination guard: private, loopback and metadata addresses are refused with 403. When the
 * gateway resolves destinations, the address it checked becomes the request's `dialTarget`.
 */
export function destinationStep(guard: DestinationGuard): AdmissionStep {
  const pin = guard.resolution === "gateway" ? guard.pin?.bind(guard) : undefined;
  if (guard.resolution === "gateway" && pin === undefined) {
    throw new Error("A guard resolving destinations must pin them");
  }
  return {
    name: "destination",
    stage: AdmissionStage.request,
    admit(request: AdmissionRequest): MaybePromise<AdmissionVerdict> {
      if (pin === undefined) return guard.check(request.target!);
      const verdict = pin(request.target!);
      return verdict instanceof Promise
        ? verdict.then((settled) => pinned(request, settled))
        : pinned(request, verdict);
    },
  };
}

export interface AdmissionParts {
  router: Pick<Router, "authenticate">;
  guard: DestinationGuard;
  /** The core's own steps, in their order (client address checks, then project limits). */
  core?: readonly AdmissionStep[];
}

/** The steps every listener runs, in the order they run. */
export function admissionSteps(parts: AdmissionParts): AdmissionStep[] {
  return [credentialsStep(parts.router), ...(parts.core ?? []), destinationStep(parts.guard)];
}
