/**
 * Fault points for the crash tests: a process started with OCTOPROX_FAULT_POINT=<name> kills
 * itself (SIGKILL: no cleanup, as a power cut or an OOM kill) the first time it reaches that
 * point, so a test can stop it exactly between two steps whose order matters (a write's commit
 * and its announcement). Unset, as in every real deployment, a point costs one comparison.
 *
 * Points: `after_commit` (control/core/store.ts: a write committed, not yet announced).
 */
const ARMED = process.env.OCTOPROX_FAULT_POINT;

export function faultPoint(name: "after_commit"): void {
  if (ARMED === name) process.kill(process.pid, "SIGKILL");
}
