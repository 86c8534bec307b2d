/**
 * Where the request path counts what judging found, per project and site (docs/blocking.md): the
 * answers judged, those a rule blocked or rate-limited and the bytes their attempts carried, the
 * bytes of the good ones, the requests sent again, and what shadow rules would have given. The policy layer keeps the counts
 * and writes them to Redis (gateway/blocking/domain-counts.ts). Memory only, never throws.
 */
export interface DomainTally {
  /** A judged answer through `connectorId`; `bytes` both ways for a blocked or rate-limited one. */
  judged(
    projectId: string,
    site: string,
    connectorId: string,
    verdict: "ok" | "blocked" | "rate_limited",
    bytes: number,
  ): void;
  /** The bytes both ways of a judged answer that went on to the client. */
  goodBytes(projectId: string, site: string, connectorId: string, bytes: number): void;
  /** A judged request sent again through another exit after a verdict. */
  retried(projectId: string, site: string, connectorId: string): void;
  /** A rule in shadow mode matched (nothing was done). */
  shadow(projectId: string, site: string, rule: string, verdict: string): void;
}
