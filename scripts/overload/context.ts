/** What every overload part is given. */
export interface OverloadContext {
  /** How long the sustained load runs (the gateway's 2 x capacity; default 60 s). */
  durationMs: number;
  /** The worker's health backlog (default 100,000 keys). */
  healthKeys: number;
  /** A progress line on standard error. */
  log(message: string): void;
}
