/**
 * The feed's manifest and head as stored text: written by the controller's publisher, read by
 * the publisher (to compare) and every gateway's follower (to verify). Both are JSON with keys
 * in a fixed order and the manifest's section names sorted, so one manifest is one text.
 *
 * Runs unchanged on Node and Deno.
 */
import * as v from "valibot";
import { type Head, HeadSchema, type Manifest, ManifestSchema, SCHEMA_VERSION } from "./models.ts";

/** The manifest's JSON: section names sorted (code-unit order), each with its digest. */
export function manifestJson(digests: ReadonlyMap<string, string>): string {
  const names = [...digests.keys()].sort();
  const sections: Record<string, string> = {};
  for (const name of names) sections[name] = digests.get(name)!;
  // Section names are never integer-like ("global", "runtime", "connector:<uuid>"), so an
  // object keeps the sorted insertion order when serialised.
  return JSON.stringify({ schema: SCHEMA_VERSION, sections });
}

export function headJson(digest: string, compiledAtMs: number): string {
  return JSON.stringify({ schema: SCHEMA_VERSION, digest, compiled_at: compiledAtMs });
}

/** What a stored head says, before any check of its digest. */
export type ReadHead =
  | { kind: "head"; head: Head }
  /** Written by a release of another feed schema (an upgrade in progress). */
  | { kind: "other_schema"; schema: unknown }
  | { kind: "invalid"; problem: string };

export function readHead(text: string): ReadHead {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: "invalid", problem: "the head is not JSON" };
  }
  if (typeof value === "object" && value !== null && "schema" in value) {
    const schema = (value as { schema: unknown }).schema;
    if (schema !== SCHEMA_VERSION) return { kind: "other_schema", schema };
  }
  const parsed = v.safeParse(HeadSchema, value);
  if (!parsed.success) return { kind: "invalid", problem: parsed.issues[0].message };
  return { kind: "head", head: parsed.output };
}

/** Parses a manifest's text (already verified against the head), or undefined when invalid. */
export function readManifest(text: string): Manifest | undefined {
  try {
    const parsed = v.safeParse(ManifestSchema, JSON.parse(text));
    return parsed.success ? parsed.output : undefined;
  } catch {
    return undefined;
  }
}
