/**
 * The upstream keep-alive pool's bounds (upstream-pool.ts), in a module of their own that both
 * runtimes load (the pool itself is Deno's): how many idle legs per upstream, how long one waits,
 * and how lately one must have been used to carry a request that cannot be sent again.
 */
export const UPSTREAM_POOL_MAX_IDLE = 32;
export const UPSTREAM_POOL_IDLE_MS = 30_000;
/** The longest a leg may have been idle to carry a request that cannot be sent again. */
export const UPSTREAM_POOL_UNRETRIED_IDLE_MS = 2_000;
