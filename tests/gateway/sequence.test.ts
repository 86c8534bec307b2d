/**
 * Sequential routing in the router: a project with a connector sequence is routed through its
 * current connector alone (whatever the strategy; earlier and later connectors take nothing),
 * and refused with 503 and the reason when the sequence is exhausted or its current connector
 * cannot serve; a traffic limit keeps its own answer. A feed of an earlier release, without the
 * field, parses as no sequence.
 */
import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { CoreRouter } from "../../shared/routing/router.ts";
import { isRefusal, RejectionReason } from "../../shared/routing/contract.ts";
import {
  type FeedSections,
  type FeedSequence,
  GlobalSectionSchema,
} from "../../shared/feed/models.ts";
import { STRATEGIES, type Strategy } from "../../shared/roles.ts";
import {
  client,
  connector,
  emptyRuntime,
  feed,
  project,
  proxy,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const NOW = 1_700_000_000_000;

function sequence(current: number, over: Partial<FeedSequence> = {}): FeedSequence {
  return {
    connectors: ["a", "b", "c"],
    current,
    on_end: "stop",
    on_unavailable: "reject",
    exhausted: false,
    ...over,
  };
}

/** Connectors a, b and c of two healthy proxies each, weights favouring the ones not current. */
function sections(over: { a?: object; b?: object; c?: object } = {}) {
  return ["a", "b", "c"].map((id) =>
    section(
      connector(id, { weight: id === "b" ? 1 : 100, ...over[id as "a" | "b" | "c"] }),
      [`${id}1`, `${id}2`],
    )
  );
}

function routed(
  seq: FeedSequence | null,
  options: { sections?: ReturnType<typeof sections>; strategy?: Strategy; runtime?: object } = {},
) {
  const router = new CoreRouter({
    verifyPassword,
    nowMs: () => NOW,
    log: { warn: () => {} },
  });
  router.apply(
    feed(options.sections ?? sections(), {
      projects: [project({ strategy: options.strategy ?? "round_robin", sequence: seq })],
      runtime: { ...emptyRuntime(), ...options.runtime },
    }),
  );
  return router;
}

async function served(router: CoreRouter, count: number, c = client()): Promise<Set<string>> {
  const proxies = new Set<string>();
  for (let i = 0; i < count; i++) {
    const result = await router.acquire(c, target());
    if (isRefusal(result)) throw new Error(`refused: ${result.status} ${result.reason}`);
    result.release({ ok: true });
    proxies.add(result.upstream.proxyId);
  }
  return proxies;
}

async function refusal(router: CoreRouter, c = client(), exclude = new Set<string>()) {
  const result = await router.acquire(c, target(), exclude);
  if (!isRefusal(result)) {
    result.release({ ok: true });
    throw new Error(`served by ${result.upstream.proxyId}`);
  }
  return result;
}

const unavailable = (reason: string) => ({
  status: 503,
  proxyStatus: "destination_unavailable",
  reason,
  rejection: RejectionReason.sequenceUnavailable,
});

describe("a project with a connector sequence", () => {
  it.each(STRATEGIES)("%s: only the current connector's proxies serve", async (strategy) => {
    const router = routed(sequence(1), { strategy });
    const sticky = client({ user: "shop", sessionId: "s1" });
    const seen = await served(router, 40, strategy === "sticky" ? sticky : client());
    for (const id of seen) expect(id).toMatch(/^b/);
    if (strategy === "round_robin") expect(seen).toEqual(new Set(["b1", "b2"]));
  });

  it("without a sequence every connector shares by weight", async () => {
    const seen = await served(routed(null), 60);
    expect([...seen].some((id) => id.startsWith("a"))).toBe(true);
    expect([...seen].some((id) => id.startsWith("c"))).toBe(true);
  });

  it("follows the sequence as feeds move it", async () => {
    const router = routed(sequence(0));
    expect(await served(router, 4)).toEqual(new Set(["a1", "a2"]));
    router.apply(feed(sections(), { projects: [project({ sequence: sequence(1) })] }));
    expect(await served(router, 4)).toEqual(new Set(["b1", "b2"]));
    router.apply(feed(sections(), { projects: [project({ sequence: null })] }));
    const shared = [...await served(router, 60)];
    expect(shared.some((id) => id.startsWith("a")) && shared.some((id) => id.startsWith("c")))
      .toBe(true);
  });

  it("exhausted: 503 saying so, whatever serves", async () => {
    const router = routed(sequence(2, { exhausted: true }));
    expect(await refusal(router)).toEqual({
      status: 503,
      proxyStatus: "destination_unavailable",
      reason: "This project's connector sequence is exhausted: its last connector ran dry",
      rejection: RejectionReason.sequenceExhausted,
    });
  });

  it("the current connector disabled, being deleted or not in the feed: 503 with the reason", async () => {
    expect(await refusal(routed(sequence(1), { sections: sections({ b: { enabled: false } }) })))
      .toEqual(
        unavailable("The current connector of this project's sequence (2 of 3) is disabled"),
      );
    expect(
      await refusal(routed(sequence(1), { sections: sections({ b: { pending_deletion: true } }) })),
    ).toEqual(
      unavailable("The current connector of this project's sequence (2 of 3) is being deleted"),
    );
    const withoutB = sections().filter((s) => s.connector.id !== "b");
    expect(await refusal(routed(sequence(1), { sections: withoutB }))).toEqual(
      unavailable("The current connector of this project's sequence (2 of 3) is not in routing"),
    );
    // Another project's connector is not this project's to route.
    const foreign = sections({ b: { project_id: "p2" } });
    expect(await refusal(routed(sequence(1), { sections: foreign }))).toEqual(
      unavailable("The current connector of this project's sequence (2 of 3) is not in routing"),
    );
    // An index past the list names no connector.
    expect(await refusal(routed(sequence(7)))).toEqual(
      unavailable("The current connector of this project's sequence is not in routing"),
    );
  });

  it("the current connector without a usable proxy: 503 with the reason", async () => {
    const down = sections();
    down[1] = section(connector("b"), [
      proxy("b1", { status: "unhealthy" }),
      proxy("b2", { status: "initializing" }),
    ]);
    expect(await refusal(routed(sequence(1), { sections: down }))).toEqual(
      unavailable("The current connector of this project's sequence (2 of 3) has no healthy proxy"),
    );
    // A provider pool's proxies past their usable-until take no new request.
    const expired = sections();
    expired[1] = section(connector("b"), [
      proxy("b1", { usable_until_ms: NOW - 1 }),
      proxy("b2", { usable_until_ms: NOW }),
    ]);
    expect(await refusal(routed(sequence(1), { sections: expired }))).toEqual(
      unavailable("The current connector of this project's sequence (2 of 3) has no usable proxy"),
    );
    const empty = sections();
    empty[1] = section(connector("b"), []);
    expect(await refusal(routed(sequence(1), { sections: empty }))).toEqual(
      unavailable(
        "The current connector of this project's sequence (2 of 3) has no proxy in routing",
      ),
    );
    // A place or a domain the current connector does not serve: no other one stands in.
    const placed = sections({ b: { countries: ["US"] } });
    expect(
      await refusal(
        routed(sequence(1), { sections: placed }),
        client({
          user: "shop",
          country: "DE",
        }),
      ),
    ).toEqual(
      unavailable("The current connector of this project's sequence (2 of 3) has no proxy for DE"),
    );
    const filtered = sections({ b: { domain_deny: ["example.com"] } });
    expect(await refusal(routed(sequence(1), { sections: filtered }))).toEqual(
      unavailable(
        "The current connector of this project's sequence (2 of 3) does not serve this domain",
      ),
    );
  });

  it("an earlier connector's proxies are not tried again on a retry", async () => {
    const router = routed(sequence(1));
    expect(await refusal(router, client(), new Set(["b1", "b2"]))).toMatchObject({
      status: 502,
      rejection: RejectionReason.allProxiesTried,
    });
  });

  it("a traffic limit and quarantines keep their own answers", async () => {
    const blocked = routed(sequence(1), {
      sections: sections({ b: { traffic: { action: "block", limit_status: 509 } } }),
      runtime: { traffic_blocks: [{ connector_id: "b", until_ms: NOW + 60_000 }] },
    });
    expect(await refusal(blocked)).toMatchObject({
      status: 509,
      rejection: RejectionReason.trafficLimitExceeded,
    });
    const resting = routed(sequence(1), {
      runtime: {
        quarantines: [
          { proxy_id: "b1", until_ms: NOW + 60_000 },
          { proxy_id: "b2", until_ms: NOW + 60_000 },
        ],
      },
    });
    expect(await refusal(resting)).toMatchObject({
      status: 429,
      rejection: RejectionReason.allProxiesQuarantined,
    });
  });

  it("a feed of an earlier release, without the field, has no sequence", () => {
    const { sequence: _, ...older } = project();
    const global = v.parse(GlobalSectionSchema, {
      schema: 1,
      default_strategy: "round_robin",
      projects: [older],
    });
    expect(global.projects[0].sequence).toBeNull();
    const sectionsOf: FeedSections = feed(sections(), { projects: global.projects });
    const router = new CoreRouter({ verifyPassword });
    expect(router.apply(sectionsOf).projectsById.get("p1")!.sequence).toBeUndefined();
  });
});
