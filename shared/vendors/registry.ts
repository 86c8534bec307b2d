/**
 * The provider registry: every descriptor a process knows (shipped, read from
 * `OCTOPROX_PROVIDERS_DIR`, stored by admins) and the one way a connector's provider is built
 * from its stored config and credential (`descriptorProvider`), so the compiler, the api, the
 * jobs and every gateway build the same provider.
 *
 * A shipped id cannot be taken by a file or a custom descriptor; a file's id cannot be taken by a
 * custom one. Runs unchanged on Node and Deno.
 */
import { BUILTIN_DESCRIPTORS } from "./builtin/index.ts";
import { type Descriptor, type DescriptorSource, parseDescriptor } from "./descriptor.ts";
import { checkConnectorConfig, checkCredentialConfig, proxyTypeOf } from "./fields.ts";
import { DescriptorProvider } from "./provider.ts";

export interface RegisteredDescriptor {
  descriptor: Descriptor;
  source: DescriptorSource;
  /** A custom descriptor's stored version; 1 for the others. */
  version: number;
}

/** Why a connector's provider could not be built. */
export type ProviderFailure =
  | { ok: false; reason: "gone"; message: string }
  | { ok: false; reason: "invalid"; message: string };

export type ProviderResult = { ok: true; provider: DescriptorProvider } | ProviderFailure;

export interface ProviderInputs {
  provider: string;
  config: Readonly<Record<string, unknown>>;
}

/**
 * Stored descriptors (Postgres rows, or the feed's copy of them) that parse, as the registry
 * takes them: one this release cannot parse is left out (its connectors have no provider).
 */
export function storedDescriptors(
  rows: readonly { document: unknown; version: number }[],
): { descriptor: Descriptor; version: number }[] {
  const out: { descriptor: Descriptor; version: number }[] = [];
  for (const row of rows) {
    const parsed = parseDescriptor(row.document);
    if (parsed.ok) out.push({ descriptor: parsed.descriptor, version: row.version });
  }
  return out;
}

let builtins: ReadonlyMap<string, RegisteredDescriptor> | undefined;

/** The shipped descriptors, parsed once per process (a broken one is a release bug: it throws). */
export function builtinDescriptors(): ReadonlyMap<string, RegisteredDescriptor> {
  if (builtins === undefined) {
    const map = new Map<string, RegisteredDescriptor>();
    for (const input of BUILTIN_DESCRIPTORS) {
      const parsed = parseDescriptor(input);
      if (!parsed.ok) {
        throw new Error(`shipped descriptor ${String(input.id)}: ${parsed.issues.join("; ")}`);
      }
      map.set(parsed.descriptor.id, {
        descriptor: parsed.descriptor,
        source: "builtin",
        version: 1,
      });
    }
    builtins = map;
  }
  return builtins;
}

export class ProviderRegistry {
  private files = new Map<string, RegisteredDescriptor>();
  private custom = new Map<string, RegisteredDescriptor>();

  /** A registry with this one's folder and custom descriptors, changed apart from it. */
  fork(): ProviderRegistry {
    const copy = new ProviderRegistry();
    copy.files = this.files;
    copy.custom = this.custom;
    return copy;
  }

  /** Replaces the descriptors read from the providers folder. */
  setFileDescriptors(descriptors: readonly Descriptor[]): void {
    this.files = new Map(
      descriptors.filter((d) => !builtinDescriptors().has(d.id)).map((d) => [
        d.id,
        { descriptor: d, source: "file" as const, version: 1 },
      ]),
    );
  }

  /** Replaces the stored custom descriptors (what Postgres or the feed holds now). */
  setCustomDescriptors(descriptors: readonly { descriptor: Descriptor; version: number }[]): void {
    this.custom = new Map(
      descriptors.filter((d) => !this.reservedId(d.descriptor.id)).map((d) => [
        d.descriptor.id,
        { descriptor: d.descriptor, source: "custom" as const, version: d.version },
      ]),
    );
  }

  /** An id a custom descriptor may not take: a shipped or a file descriptor has it. */
  reservedId(id: string): DescriptorSource | undefined {
    if (builtinDescriptors().has(id)) return "builtin";
    if (this.files.has(id)) return "file";
    return undefined;
  }

  get(id: string): RegisteredDescriptor | undefined {
    return builtinDescriptors().get(id) ?? this.files.get(id) ?? this.custom.get(id);
  }

  /** The descriptors a gateway has no copy of (folder and custom), by id. */
  shipped(): RegisteredDescriptor[] {
    return [...this.files.values(), ...this.custom.values()]
      .sort((a, b) => a.descriptor.id.localeCompare(b.descriptor.id));
  }

  /** Every descriptor, by id. */
  list(): RegisteredDescriptor[] {
    const all = [...builtinDescriptors().values(), ...this.files.values(), ...this.custom.values()];
    return all.sort((a, b) => a.descriptor.id.localeCompare(b.descriptor.id));
  }

  /**
   * The provider of a connector: `gone` when no descriptor has its id, `invalid` when the stored
   * configs are ones the descriptor refuses. Configs are checked here, so every process applies
   * the descriptor's defaults alike. `shipped`: the configs are a gateway's copy, which lacks the
   * secrets no template reads.
   */
  descriptorProvider(
    connector: ProviderInputs,
    credential: Readonly<Record<string, unknown>> | null,
    shipped = false,
  ): ProviderResult {
    const entry = this.get(connector.provider);
    if (entry === undefined) {
      return { ok: false, reason: "gone", message: `provider ${connector.provider} is gone` };
    }
    const descriptor = entry.descriptor;
    const checkedConnector = checkConnectorConfig(descriptor, connector.config, shipped);
    const checkedCredential = checkCredentialConfig(descriptor, credential ?? {}, shipped);
    const issues = [
      ...checkedConnector.issues.map((i) => `config.${i.key} ${i.message}`),
      ...checkedCredential.issues.map((i) => `credential.${i.key} ${i.message}`),
    ];
    const type = proxyTypeOf(descriptor, checkedConnector.config);
    if (issues.length > 0 || type === undefined) {
      return { ok: false, reason: "invalid", message: issues.join("; ") };
    }
    return {
      ok: true,
      provider: new DescriptorProvider(
        descriptor,
        type,
        checkedConnector.config,
        checkedCredential.config,
      ),
    };
  }
}
