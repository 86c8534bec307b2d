/**
 * Who may use a project from where: the admission step (session/admission.ts) that checks the
 * client's address against the project's allowed blocks (`allowed_cidrs`; none: every address)
 * once the credentials step named the project, password-less clients included, and refuses with
 * 403 before anything is routed or dialled. Under strict mode (a gateway listening beyond
 * loopback) it also refuses a password-less request for a project whose password-less blocks
 * let every address in (strict-mode.ts). The blocks are indexed once per snapshot
 * (core/snapshot.ts `ProjectAccess`): a request costs a map lookup per prefix length.
 * Runtime-neutral.
 */
import type { MaybePromise } from "../../shared/routing/contract.ts";
import { clientAddressDenied, openProjectRefused } from "../../shared/routing/refusals.ts";
import type { RoutingSnapshot } from "../../shared/routing/snapshot.ts";
import {
  type AdmissionRequest,
  AdmissionStage,
  type AdmissionStep,
  type AdmissionVerdict,
} from "../base/admission.ts";

export interface ClientAddressOptions {
  /** The snapshot in force (the router's). */
  snapshot(): RoutingSnapshot | undefined;
  /** The gateway listens beyond loopback: open projects are served with a password only. */
  strict: boolean;
}

export function clientAddressStep(options: ClientAddressOptions): AdmissionStep {
  const strict = options.strict;
  return {
    name: "client address",
    stage: AdmissionStage.client,
    admit(request: AdmissionRequest): MaybePromise<AdmissionVerdict> {
      const project = options.snapshot()?.projectsById.get(request.client!.projectId);
      // Gone from the feed since the credentials step: the router refuses it.
      if (project === undefined) return undefined;
      const access = project.access;
      if (access.allowed !== undefined) {
        const ip = request.clientIp;
        if (ip === undefined || !access.allowed.has(ip)) return clientAddressDenied;
      }
      if (strict && request.credentials === null && access.openToAnyone) {
        return openProjectRefused;
      }
      return undefined;
    },
  };
}
