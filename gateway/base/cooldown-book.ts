/**
 * Where the request path reads and writes the exits cooled down per site (a block verdict's
 * consequence, shared/blocking/rules.ts): the socket layer asks which exits to pass over for a
 * target's site and tells of a new cool-down; the policy layer keeps them (here at once, on every
 * gateway through Redis: gateway/blocking/cooldowns.ts). Both calls touch memory only and never
 * throw: they sit on the request path.
 */
export interface CooldownBook {
  /** The exits (proxy ids) cooled down for `site` now; undefined when none is. */
  cooled(site: string): ReadonlySet<string> | undefined;
  /**
   * `proxyId` is passed over for `site` for `durationMs`, from now (`projectId`, whose verdict
   * it was: what the api's per-site page counts it under).
   */
  coolDown(site: string, proxyId: string, durationMs: number, projectId: string): void;
}
