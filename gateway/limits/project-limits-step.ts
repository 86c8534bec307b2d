/**
 * The project-limits admission step, after the client is known and before anything about the
 * target is asked: the project's traffic quota (refused with its limit status while the feed
 * says it is blocked), its request-rate limit across every gateway (request-rate.ts; 429), and
 * its cap on requests at once on this gateway (max_connections; 429), counted in dispatch on one
 * word every isolate shares and held by a grant until the request ends. Checked in that order,
 * so a request refused for its quota or its rate holds no connection; one refused for the cap
 * has spent a token of its rate, as a request that went through would.
 */
import type { Dispatch } from "../../shared/routing/dispatch.ts";
import { projectConnectionLimit, projectRateLimited } from "../../shared/routing/refusals.ts";
import type { Refusal } from "../../shared/routing/contract.ts";
import type { ProjectEntry } from "../../shared/routing/snapshot.ts";
import {
  type AdmissionGrant,
  type AdmissionRequest,
  AdmissionStage,
  type AdmissionStep,
  type AdmissionVerdict,
} from "../base/admission.ts";
import type { MaybePromise } from "../../shared/routing/contract.ts";
import type { RequestRateLimiter } from "./request-rate.ts";

export interface ProjectLimitsParts {
  /** The snapshot's projects and the quota's refusal (the router). */
  router: {
    project(projectId: string): ProjectEntry | undefined;
    quotaRefusal(projectId: string): Refusal | undefined;
  };
  dispatch: Pick<Dispatch, "enterProject" | "leaveProject">;
  rate: Pick<RequestRateLimiter, "admit">;
}

/** Gives the project's connection slot back once, when the request ends. */
class ConnectionGrant implements AdmissionGrant {
  readonly #dispatch: ProjectLimitsParts["dispatch"];
  readonly #slot: number;
  #released = false;

  constructor(dispatch: ProjectLimitsParts["dispatch"], slot: number) {
    this.#dispatch = dispatch;
    this.#slot = slot;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#dispatch.leaveProject(this.#slot);
  }
}

export function projectLimitsStep(parts: ProjectLimitsParts): AdmissionStep {
  const connections = (project: ProjectEntry): AdmissionVerdict => {
    const cap = project.project.max_connections;
    if (cap === null || cap <= 0) return undefined;
    if (!parts.dispatch.enterProject(project.slot, cap)) return projectConnectionLimit;
    return new ConnectionGrant(parts.dispatch, project.slot);
  };
  return {
    name: "project_limits",
    stage: AdmissionStage.client,
    admit(request: AdmissionRequest): MaybePromise<AdmissionVerdict> {
      const client = request.client;
      if (client === undefined) return undefined;
      const project = parts.router.project(client.projectId);
      if (project === undefined) return undefined;
      const quota = parts.router.quotaRefusal(project.id);
      if (quota !== undefined) return quota;
      const rate = project.project.rate_limit;
      if (rate === null) return connections(project);
      const admitted = parts.rate.admit(project.id, rate);
      if (admitted === true) return connections(project);
      if (admitted === false) return projectRateLimited;
      return admitted.then((ok) => (ok ? connections(project) : projectRateLimited));
    },
  };
}
