/**
 * Handing each applied feed from the isolate that follows it (the main one) to the isolates
 * that serve beside it in the same process. Runtime-neutral.
 *
 * Only what changed crosses (a structured clone of plain section objects): the global and
 * runtime sections when they are new objects, the connector sections that are new, the ids of
 * those that left. The receiving `SectionsMirror` puts every unchanged section back as the very
 * object it applied before, so its snapshot builds keep their indexes exactly as the main one's
 * do. With the sections go the slots the main isolate gave their rows and connectors: counts are
 * indexed by slot in the process's shared buffers, so every isolate must use the same ones, and
 * only the main isolate numbers them (dispatch.ts `follow`).
 */
import type {
  ConnectorSection,
  FeedSections,
  GlobalSection,
  RuntimeSection,
} from "../feed/models.ts";
import type { RoutingSnapshot } from "./snapshot.ts";

export interface SectionsDelta {
  /** Present when the global section changed (always in a first delta). */
  global?: GlobalSection;
  runtime?: RuntimeSection;
  /** New or changed connector sections, by connector id. */
  connectors: [string, ConnectorSection][];
  /** Connector ids that left the feed. */
  removed: string[];
  /** `[proxy id, slot]` for every row of the connectors in `connectors`. */
  proxySlots: [string, number][];
  /** `[connector id, slot]` for the connectors in `connectors`. */
  connectorSlots: [string, number][];
  /** `[project id, slot]` for every project, when `global` is in the delta. */
  projectSlots: [string, number][];
}

/**
 * What changed from `previous` (the sections last handed over; undefined for the first) to the
 * sections `snapshot` was just built from, with the slots it gave them.
 */
export function sectionsDelta(
  previous: FeedSections | undefined,
  snapshot: RoutingSnapshot,
): SectionsDelta {
  const next = snapshot.sections;
  const delta: SectionsDelta = {
    connectors: [],
    removed: [],
    proxySlots: [],
    connectorSlots: [],
    projectSlots: [],
  };
  if (previous === undefined || previous.global !== next.global) {
    delta.global = next.global;
    for (const [id, entry] of snapshot.projectsById) delta.projectSlots.push([id, entry.slot]);
  }
  if (previous === undefined || previous.runtime !== next.runtime) delta.runtime = next.runtime;
  for (const [id, section] of next.connectors) {
    if (previous?.connectors.get(id) === section) continue;
    delta.connectors.push([id, section]);
    const index = snapshot.connectors.get(id);
    if (index === undefined) continue;
    delta.connectorSlots.push([id, index.slot]);
    for (const entry of index.proxies) delta.proxySlots.push([entry.id, entry.slot]);
  }
  if (previous !== undefined) {
    for (const id of previous.connectors.keys()) {
      if (!next.connectors.has(id)) delta.removed.push(id);
    }
  }
  return delta;
}

/** The receiving side: the sections as the main isolate has them, unchanged ones kept by identity. */
export class SectionsMirror {
  #current: FeedSections | undefined;

  get current(): FeedSections | undefined {
    return this.#current;
  }

  /** The full sections after `delta`. Throws when a first delta lacks a section. */
  apply(delta: SectionsDelta): FeedSections {
    const previous = this.#current;
    const global = delta.global ?? previous?.global;
    const runtime = delta.runtime ?? previous?.runtime;
    if (global === undefined || runtime === undefined) {
      throw new Error("A first feed handed over without its global or runtime section");
    }
    let connectors: ReadonlyMap<string, ConnectorSection>;
    if (previous !== undefined && delta.connectors.length === 0 && delta.removed.length === 0) {
      // Unchanged connectors: the same map, so the build sees nothing to re-index.
      connectors = previous.connectors;
    } else {
      const map = new Map(previous?.connectors);
      for (const id of delta.removed) map.delete(id);
      for (const [id, section] of delta.connectors) map.set(id, section);
      connectors = map;
    }
    const sections: FeedSections = { global, runtime, connectors };
    this.#current = sections;
    return sections;
  }
}
