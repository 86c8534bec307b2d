/**
 * The floor plan: every folder of the checkout has a stack and a rank in it, and an import may
 * point only down or across (to the same rank) within its stack, or into a stack below it. Two
 * folders never import each other both ways, even at the same rank: the contract both need goes
 * in a file of its own, at the lower of the two.
 *
 * The tables below are the one place the plan is written; docs/architecture.md's "Layers"
 * section is generated from them (`npm run docs`), and `npm run lint` checks the code against
 * them (scripts/lint/imports.ts). A folder the tables do not name fails the check, so a new one
 * is placed on purpose.
 */

/** One rank of a stack: the folders in it (paths from the checkout's root) and what it holds. */
export interface Layer {
  name: string;
  /** Folders, or single files, at this rank. A folder takes everything below it. */
  paths: readonly string[];
  about: string;
}

/** A stack: its layers from the bottom up, and the stacks it may import. */
export interface Stack {
  name: string;
  about: string;
  /** Stacks below this one: any of their modules may be imported from any rank of this one. */
  uses: readonly string[];
  layers: readonly Layer[];
}

export const STACKS: readonly Stack[] = [
  {
    name: "shared",
    about: "What both runtimes run unchanged (Deno and Node): web-standard APIs only.",
    uses: [],
    layers: [{
      name: "shared",
      paths: ["shared", "package.json"],
      about: "The routing core, the feed's codec, the wire protocols, the async toolkit, " +
        "settings, Redis key names and the error catalogue.",
    }],
  },
  {
    name: "db",
    about: "The Postgres schema and its migrations.",
    uses: ["shared"],
    layers: [{ name: "db", paths: ["db"], about: "Drizzle tables and the migration runner." }],
  },
  {
    name: "control",
    about: "The control plane (Node): api, controller and worker roles.",
    uses: ["shared", "db"],
    layers: [
      {
        name: "model",
        paths: ["control/model"],
        about: "What an entity is: the valibot schemas of what the api and the config " +
          "file accept, their validation and the field vocabulary.",
      },
      {
        name: "core",
        paths: ["control/core"],
        about: "Plumbing every feature borrows: the store, Redis and its scripts, the job " +
          "queue and catalogue, loops, leases, the logger, the echo.",
      },
      {
        name: "domain",
        paths: [
          "control/services",
          "control/vendors",
          "control/provider-api",
          "control/feed",
          "control/backup",
          "control/traffic",
          "control/metrics",
          "control/upstream",
          "control/egress",
          "control/geo",
          "control/alerts",
          "control/audit",
          "control/cloud",
        ],
        about: "One folder per feature: what it does, with no knowledge of HTTP, of jobs " +
          "or of the process that runs it.",
      },
      {
        name: "adapters",
        paths: ["control/jobs", "control/api", "control/config", "control/cli", "control/web"],
        about: "Ways in: job handlers, the admin and extraction api, config as code, the " +
          "CLI and the dashboard, each calling the domain.",
      },
      {
        name: "process",
        paths: ["control/node", "control/roles", "control/main.ts"],
        about: "A running node: its roles, heartbeat, telemetry and start and stop.",
      },
    ],
  },
  {
    name: "gateway",
    about: "The data plane (Deno): listeners, admission, routing and metering.",
    uses: ["shared"],
    layers: [
      {
        name: "base",
        paths: ["gateway/base", "gateway/redis"],
        about: "Contracts net, policy and app share: admission, transfer hooks, metrics, " +
          "the log and the scrubber; the two Redis transports (TCP and HTTP).",
      },
      {
        name: "net",
        paths: ["gateway/net"],
        about: "Sockets and protocols: HTTP forwarding, CONNECT and SOCKS5 tunnels, dials, " +
          "client sessions.",
      },
      {
        name: "policy",
        paths: [
          "gateway/access",
          "gateway/blocking",
          "gateway/limits",
          "gateway/metering",
          "gateway/feed",
          "gateway/geo",
          "gateway/tunnel-plane",
        ],
        about: "Admission steps and what follows the cluster: client access, limits, " +
          "metering, the routing feed, the IP databases, the cool-downs block verdicts set, " +
          "the tunnel plane's resolver.",
      },
      {
        name: "app",
        paths: ["gateway/app", "gateway/main.ts"],
        about: "The shell: isolates, listeners, heartbeat and the wiring of the parts.",
      },
    ],
  },
  {
    name: "tools",
    about: "What builds, checks, tests and measures the product.",
    uses: ["shared", "db", "control", "gateway"],
    layers: [
      {
        name: "tooling",
        paths: [
          "scripts",
          "drizzle.config.ts",
          "vitest.config.ts",
          "vitest.chaos.config.ts",
          "vitest.load.config.ts",
        ],
        about: "Build, start, migrate, lint and docs scripts.",
      },
      {
        name: "testkit",
        paths: ["testkit"],
        about: "What tests, e2e and benchmarks share: stores, processes, clusters, " +
          "upstreams, waiting.",
      },
      {
        name: "harnesses",
        paths: [
          "scripts/bench",
          "scripts/loadgen",
          "scripts/fuzz",
          "scripts/overload",
          "scripts/bench-isolates.ts",
          "scripts/bench-probe.ts",
          "scripts/fuzz-properties.ts",
          "scripts/screenshots.ts",
        ],
        about: "Benchmarks, the load generator, fuzzers and the screenshot tour.",
      },
      { name: "tests", paths: ["tests", "e2e"], about: "Unit, integration and end-to-end tests." },
    ],
  },
];

/** Where a module sits: its stack, its rank there, and the folder the two-way rule compares. */
export interface Place {
  stack: string;
  rank: number;
  layer: string;
  /** The layer path that holds the module (e.g. `control/api`), or its first two segments. */
  folder: string;
}

/** The place of `path` (from the root, `/`-separated); undefined when no table names it. */
export function placeOf(path: string): Place | undefined {
  let best: { place: Place; length: number } | undefined;
  STACKS.forEach((stack) => {
    stack.layers.forEach((layer, rank) => {
      for (const held of layer.paths) {
        if (path !== held && !path.startsWith(`${held}/`)) continue;
        if (best !== undefined && best.length >= held.length) continue;
        best = {
          length: held.length,
          place: { stack: stack.name, rank, layer: layer.name, folder: folderOf(path, held) },
        };
      }
    });
  });
  return best?.place;
}

/**
 * The folder two-way imports are judged by: the first folder below the stack's own (so
 * `shared/routing`, `control/api`, `gateway/net`, `tests/api`), or the file itself at the top.
 */
function folderOf(path: string, held: string): string {
  const parts = path.split("/");
  const depth = held.split("/").length;
  // A layer that is one top-level folder (shared, db, testkit, tests) compares its subfolders.
  const keep = depth === 1 ? 2 : depth;
  return parts.length > keep ? parts.slice(0, keep).join("/") : path;
}

/** Why `from` may not import `to`, or undefined when it may. */
export function refusal(from: Place, to: Place): string | undefined {
  if (from.stack === to.stack) {
    if (to.rank <= from.rank) return undefined;
    return `${from.stack}'s ${from.layer} layer may not import its ${to.layer} layer (higher)`;
  }
  const stack = STACKS.find((s) => s.name === from.stack)!;
  if (stack.uses.includes(to.stack)) return undefined;
  return `the ${from.stack} stack may not import the ${to.stack} stack`;
}
