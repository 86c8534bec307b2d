/**
 * The process's provider registry: the shipped descriptors, those of `OCTOPROX_PROVIDERS_DIR`
 * (read once at start; a file that does not parse stops the process, naming the file and the
 * field, as a bad setting does) and the custom ones stored in Postgres, which every catalogue
 * read, descriptor write and job that builds a provider applies first (`refreshCustom`), so
 * any process works from what another wrote a moment ago.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { asc } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { providerDescriptors } from "../../db/schema.ts";
import { type Descriptor, parseDescriptor } from "../../shared/vendors/descriptor.ts";
import { type ProviderRegistry, storedDescriptors } from "../../shared/vendors/registry.ts";

type Db = Database["db"];

/** Reads every `.yaml`, `.yml` and `.json` file of the folder, in name order. */
export async function readProvidersDir(dir: string): Promise<Descriptor[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => /\.(ya?ml|json)$/i.test(n)).sort();
  } catch (error) {
    throw new Error(`OCTOPROX_PROVIDERS_DIR: cannot read ${dir}`, { cause: error });
  }
  const descriptors: Descriptor[] = [];
  const seen = new Map<string, string>();
  for (const name of names) {
    const path = join(dir, name);
    let document: unknown;
    try {
      const text = await readFile(path, "utf8");
      document = /\.json$/i.test(name) ? JSON.parse(text) : parseYaml(text);
    } catch (error) {
      throw new Error(`${path}: not valid ${/\.json$/i.test(name) ? "JSON" : "YAML"}`, {
        cause: error,
      });
    }
    const parsed = parseDescriptor(document);
    if (!parsed.ok) throw new Error(`${path}: ${parsed.issues.join("; ")}`);
    const other = seen.get(parsed.descriptor.id);
    if (other !== undefined) {
      throw new Error(`${path}: id ${parsed.descriptor.id} is already the id of ${other}`);
    }
    seen.set(parsed.descriptor.id, name);
    descriptors.push(parsed.descriptor);
  }
  return descriptors;
}

/**
 * Applies the stored custom descriptors to the registry. A stored document this release cannot
 * parse is left out (its connectors then have no provider), never a reason to fail the read.
 */
export async function refreshCustom(db: Db, registry: ProviderRegistry): Promise<void> {
  const rows = await db.select().from(providerDescriptors).orderBy(asc(providerDescriptors.id));
  registry.setCustomDescriptors(storedDescriptors(rows));
}
