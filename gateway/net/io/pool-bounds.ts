/**
 * The upstream keep-alive pool's bounds (upstream-pool.ts), in a module of their own that both
 * runtimes load (the pool itself is Deno's): how many idle legs per upstream, how long one waits,
 * and how lately one must have been used to carry a request that cannot be sent again.
 */
export const UPSTREAM_POOL_MAX_IDLE = 32;
export const UPSTREAM_POOL_IDLE_MS = 30_000;
/** The longest a leg may have been idle to carry a request that cannot be sent again. */
export const UPSTREAM_POOL_UNRETRIED_IDLE_MS = 2_000;
/**
 * An upstream that closes this many idle legs in a row, each within
 * UPSTREAM_POOL_CLOSED_AT_ONCE_MS of its answer, and never carries a second request on one, closes
 * after every answer (tinyproxy does, answering HTTP/1.1 without `Connection: close`): its legs
 * are then not kept for UPSTREAM_POOL_UNKEPT_MS. Kept, each would be a race a request that cannot
 * be sent again may lose.
 */
export const UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES = 3;
export const UPSTREAM_POOL_CLOSED_AT_ONCE_MS = 1_000;
export const UPSTREAM_POOL_UNKEPT_MS = 600_000;
