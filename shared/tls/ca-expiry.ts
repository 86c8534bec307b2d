/**
 * When the TLS interception CA's end is near, and what to say of it: the gateway's log at start
 * and daily (gateway/app/mitm-ca.ts), the api's CA status (the System page). Runtime-neutral:
 * the caller schedules the daily check (`every`), so Deno can unref its timer and tests can run
 * the days by hand.
 *
 * One rule for a CA past its end: a gateway refuses to start with it (shared/tls/ca.ts `loadCa`
 * checks the validity), and one that was started before says so each day at error level, since
 * clients refuse what it signs from then on.
 */

/** A CA expiring within this many days is warned of, at start and daily. */
export const EXPIRY_WARNING_DAYS = 30;
/** How often a running gateway looks at its CA's expiry again. */
export const EXPIRY_CHECK_INTERVAL_MS = 86_400_000;

const DAY_MS = 86_400_000;

/** What the notices need of a CA. */
export interface ExpiringCa {
  notAfter: Date;
  spkiSha256: string;
}

/** Whole days from `now` to the CA's end, rounded down (negative once it has passed). */
export function daysLeft(notAfter: Date, now: Date): number {
  return Math.floor((notAfter.getTime() - now.getTime()) / DAY_MS);
}

export interface ExpiryNotice {
  level: "warn" | "error";
  msg: string;
  fields: Record<string, unknown>;
}

/**
 * What the log says of the CA's expiry now: a warning within EXPIRY_WARNING_DAYS, an error
 * past its end.
 */
export function expiryNotice(ca: ExpiringCa, now: Date): ExpiryNotice | undefined {
  const left = daysLeft(ca.notAfter, now);
  const fields = {
    not_after: ca.notAfter.toISOString(),
    days_left: left,
    spki_sha256: ca.spkiSha256,
  };
  if (ca.notAfter.getTime() <= now.getTime()) {
    return {
      level: "error",
      msg: "The TLS interception CA has expired: clients refuse what it signs, and a gateway " +
        "will not start with it; rotate it (docs/tls-interception.md)",
      fields,
    };
  }
  if (left < EXPIRY_WARNING_DAYS) {
    return {
      level: "warn",
      msg: `The TLS interception CA expires within ${EXPIRY_WARNING_DAYS} days; rotate it ` +
        "(docs/tls-interception.md)",
      fields,
    };
  }
  return undefined;
}

export interface ExpiryLog {
  warn(msg: string, fields: Record<string, unknown>): void;
  error(msg: string, fields: Record<string, unknown>): void;
}

export interface WatchExpiryOptions {
  now?: () => Date;
  intervalMs?: number;
  /** Runs `check` every `ms` until the answered function is called (setInterval by default). */
  every?: (check: () => void, ms: number) => () => void;
}

/**
 * Says the CA's expiry notice (if any) now, then every `intervalMs` (a day); answers the function
 * that stops the checks.
 */
export function watchExpiry(
  ca: ExpiringCa,
  log: ExpiryLog,
  options: WatchExpiryOptions = {},
): () => void {
  const now = options.now ?? (() => new Date());
  const every = options.every ?? ((check, ms) => {
    const timer = setInterval(check, ms);
    return () => clearInterval(timer);
  });
  const check = () => {
    const notice = expiryNotice(ca, now());
    if (notice !== undefined) log[notice.level](notice.msg, notice.fields);
  };
  check();
  return every(check, options.intervalMs ?? EXPIRY_CHECK_INTERVAL_MS);
}
