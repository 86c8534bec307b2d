/**
 * A descriptor provider: one connector's descriptor, proxy type and configs, built the same way in
 * every process (registry.ts), so the compiler, the api, the jobs and every gateway agree on the
 * countries it declares, the rows its slots hold and the credentials a request is rendered with.
 *
 * Rows keep secrets out of Postgres: a secret field a template reads renders as `{key}`, filled by
 * the one placeholder function where the row is used. A dynamic-session row is rendered again on
 * every request from the client's options (`renderRequest`), then filled the same way.
 *
 * Runs unchanged on Node and Deno.
 */
import { fillPlaceholders } from "../feed/placeholders.ts";
import type { ProxyScheme } from "../roles.ts";
import type { Descriptor, ProxyType } from "./descriptor.ts";
import {
  DEFAULT_SESSION_ID,
  randomSessionId,
  sessionIdFor,
  type SessionIdSpec,
} from "./session-id.ts";
import {
  type RenderContext,
  renderTemplate,
  templateNames,
  type TemplateSpec,
} from "./templates.ts";

type Config = Readonly<Record<string, unknown>>;

export const SessionMode = { pool: "pool", dynamic: "dynamic" } as const;
export type SessionMode = (typeof SessionMode)[keyof typeof SessionMode];

/** Slots a connector has when its config names none (session pools and port pools). */
export const DEFAULT_SLOTS = 10;

/** What a client asked for, as the username grammar reads it (shared/username.ts). */
export interface RequestOptions {
  country?: string;
  state?: string;
  city?: string;
  sessionId?: string;
  sessionMinutes?: number;
}

/** One row a slot or list entry holds, as stored: secrets as `{key}` placeholders. */
export interface ProviderRow {
  scheme: ProxyScheme;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  /** ISO 3166-1 alpha-2 when the vendor says. */
  country: string | null;
  /** What identifies the slot across syncs (`session:3`, `group:FR:0`, `port:8004`, `item:…`). */
  slot: string;
  /** Kept in the row's metadata: the vendor session id, the exit's address. */
  metadata: Record<string, unknown>;
}

/** What a template of the row's type can express (derived from the names its templates read). */
export interface Renders {
  country: boolean;
  state: boolean;
  city: boolean;
  sessionTime: boolean;
}

/** What a proxy type's username and password templates write of a request's options. */
export function typeRenders(type: ProxyType): Renders {
  const names = new Set<string>();
  for (const spec of [type.username, type.password]) {
    if (spec !== undefined) { for (const name of templateNames(spec)) names.add(name); }
  }
  return {
    country: names.has("country"),
    state: names.has("state"),
    city: names.has("city"),
    sessionTime: names.has("session_time") && type.session_time !== undefined,
  };
}

export class DescriptorProvider {
  readonly descriptor: Descriptor;
  readonly type: ProxyType;
  /** The connector's config with the descriptor's defaults applied. */
  readonly config: Config;
  readonly credential: Config;
  readonly sessionMode: SessionMode | undefined;
  /** One gateway row rendered per request. */
  readonly dynamic: boolean;
  /** Session pools and port pools: the slots (per country group, for session pools). */
  readonly slots: number;
  readonly renders: Renders;
  /** Config keys whose values are secret (credential's and connector's). */
  readonly secrets: ReadonlySet<string>;
  readonly sessionId: SessionIdSpec;
  private readonly usernameTemplate: TemplateSpec | undefined;
  private readonly passwordTemplate: TemplateSpec | undefined;

  constructor(descriptor: Descriptor, type: ProxyType, config: Config, credential: Config) {
    this.descriptor = descriptor;
    this.type = type;
    this.config = config;
    this.credential = credential;
    this.sessionMode = type.mode === "session"
      ? (config.session_mode === SessionMode.dynamic ? SessionMode.dynamic : SessionMode.pool)
      : undefined;
    this.dynamic = this.sessionMode === SessionMode.dynamic;
    this.slots = typeof config.slots === "number" ? config.slots : DEFAULT_SLOTS;
    this.sessionId = type.session_id ?? DEFAULT_SESSION_ID;
    this.usernameTemplate = type.username;
    this.passwordTemplate = type.password;
    const secrets = new Set<string>();
    for (const f of descriptor.credential_fields) if (f.secret) secrets.add(f.key);
    for (const f of descriptor.connector_fields) if (f.secret) secrets.add(f.key);
    this.secrets = secrets;
    const names = new Set<string>();
    for (const spec of [type.username, type.password]) {
      if (spec !== undefined) { for (const name of templateNames(spec)) names.add(name); }
    }
    this.renders = {
      country: names.has("country"),
      state: names.has("state"),
      city: names.has("city"),
      sessionTime: names.has("session_time") && type.session_time !== undefined,
    };
  }

  get mode() {
    return this.type.mode;
  }

  /** The config keys templates read as secrets: what the feed's credential must carry. */
  secretsRead(): Set<string> {
    const read = new Set<string>();
    const specs: (TemplateSpec | undefined)[] = [this.type.username, this.type.password];
    if (this.type.item) specs.push(this.type.item.username, this.type.item.password);
    for (const spec of specs) {
      if (spec === undefined) continue;
      for (const name of templateNames(spec)) {
        const [head, key] = name.split(".");
        if ((head === "credential" || head === "connector") && this.secrets.has(key)) read.add(key);
      }
    }
    return read;
  }

  /**
   * The credential a gateway holds for this connector: its config less every secret no template
   * reads (an API token stays in Postgres).
   */
  shippedCredential(): Record<string, unknown> {
    return this.withoutUnreadSecrets(this.credential);
  }

  /** The connector config a gateway holds: less its secrets no template reads. */
  shippedConfig(): Record<string, unknown> {
    return this.withoutUnreadSecrets(this.config);
  }

  private withoutUnreadSecrets(config: Config): Record<string, unknown> {
    const read = this.secretsRead();
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(config)) {
      if (!this.secrets.has(key) || read.has(key)) out[key] = value;
    }
    return out;
  }

  private context(extra: Partial<RenderContext>): RenderContext {
    return { credential: this.credential, connector: this.config, ...extra };
  }

  private row(
    context: RenderContext,
    slot: string,
    country: string | null,
    metadata: Record<string, unknown>,
    port?: number,
  ): ProviderRow {
    const options = { secrets: this.secrets };
    return {
      scheme: this.type.scheme,
      host: this.type.host ?? "",
      port: port ?? this.type.port ?? 0,
      username: this.usernameTemplate === undefined
        ? null
        : renderTemplate(this.usernameTemplate, context, options),
      password: this.passwordTemplate === undefined
        ? null
        : renderTemplate(this.passwordTemplate, context, options),
      country,
      slot,
      metadata,
    };
  }

  /** The one row of a dynamic-sessions connector, as stored: rendered with no options. */
  gatewayRow(): ProviderRow {
    return this.row(this.context({}), "gateway", null, { dynamic: true });
  }

  /**
   * A session pool's slot: `index` within its group (`country` null for the generic group), with
   * a vendor session id drawn once and kept in the row's metadata.
   */
  sessionSlotRow(index: number, country: string | null, sessionId?: string): ProviderRow {
    const id = sessionId ?? randomSessionId(this.sessionId);
    const context = this.context({
      index,
      session_id: id,
      country: country ?? undefined,
      session_time: this.sessionTime(undefined),
    });
    const slot = country === null ? `session:${index}` : `group:${country}:${index}`;
    return this.row(context, slot, country, { session_id: id, group: country, index });
  }

  /** A port pool's slot on sequential ports from the type's first port. */
  portSlotRow(index: number): ProviderRow {
    const port = (this.type.port ?? 0) + index;
    const row = this.row(this.context({ index, port }), `port:${port}`, null, { index }, port);
    return row;
  }

  /** A vendor list entry (list mode, or a port pool whose exits a call lists) as a row. */
  itemRow(item: Config, index: number): ProviderRow | undefined {
    const mapping = this.type.item;
    if (mapping === undefined) return undefined;
    const context = this.context({ item, index });
    const options = { secrets: this.secrets };
    const host = renderTemplate(mapping.host, context).trim();
    const port = Number(renderTemplate(mapping.port, context));
    if (host === "" || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
    const country = mapping.country === undefined
      ? null
      : renderTemplate(mapping.country, context).trim().toUpperCase() || null;
    const user = mapping.username ?? this.usernameTemplate;
    const pass = mapping.password ?? this.passwordTemplate;
    return {
      scheme: this.type.scheme,
      host,
      port,
      username: user === undefined ? null : renderTemplate(user, context, options) || null,
      password: pass === undefined ? null : renderTemplate(pass, context, options) || null,
      country: country !== null && /^[A-Z]{2}$/.test(country) ? country : null,
      slot: `item:${host.toLowerCase()}:${port}`,
      metadata: {
        exit: mapping.exit === undefined ? host : renderTemplate(mapping.exit, context).trim(),
      },
    };
  }

  /** `-sesstime-` in the vendor's unit, clamped to its bounds; its default when not asked. */
  private sessionTime(minutes: number | undefined): number | undefined {
    const spec = this.type.session_time;
    if (spec === undefined) return undefined;
    const asked = minutes ?? spec.default_minutes;
    if (asked === undefined) return undefined;
    const clamped = Math.min(spec.max_minutes, Math.max(spec.min_minutes, asked));
    return spec.unit === "seconds" ? clamped * 60 : clamped;
  }

  /**
   * A dynamic-session row's credentials for one request, placeholders filled: the client's
   * session hashed with the project id (a fresh one when it named none), its place and session
   * time in the vendor's syntax. The caller has checked the place is one this provider renders.
   */
  renderRequest(projectId: string, options: RequestOptions): {
    username: string | null;
    password: string | null;
  } {
    const sessionId = options.sessionId === undefined
      ? randomSessionId(this.sessionId)
      : sessionIdFor(projectId, options.sessionId, this.sessionId);
    const context = this.context({
      session_id: sessionId,
      country: options.country,
      state: options.state,
      city: options.city,
      session_time: this.sessionTime(options.sessionMinutes),
    });
    const renderOptions = { secrets: this.secrets };
    const sources = { connector: this.config, credential: this.credential };
    return {
      username: this.usernameTemplate === undefined
        ? null
        : fillPlaceholders(renderTemplate(this.usernameTemplate, context, renderOptions), sources),
      password: this.passwordTemplate === undefined
        ? null
        : fillPlaceholders(renderTemplate(this.passwordTemplate, context, renderOptions), sources),
    };
  }

  /**
   * Whether a request's place can be served by rendering: a country within the allow list (the
   * connector's declared countries, else the type's), a state or city only when the templates
   * write them.
   */
  servesPlace(options: RequestOptions, declared: ReadonlySet<string> | null): boolean {
    if (options.country !== undefined) {
      if (!this.renders.country) return false;
      if (declared !== null && !declared.has(options.country)) return false;
      if (
        declared === null && this.type.countries && !this.type.countries.includes(options.country)
      ) {
        return false;
      }
    }
    const type = this.type;
    if (options.state !== undefined || options.city !== undefined) {
      // A value the vendor's syntax has no word for (a state its table lacks) is not served.
      let unwritable = false;
      const context = this.context({
        country: options.country,
        state: options.state,
        city: options.city,
      });
      const probe = { secrets: this.secrets, unwritable: () => (unwritable = true) };
      if (this.usernameTemplate !== undefined) {
        renderTemplate(this.usernameTemplate, context, probe);
      }
      if (this.passwordTemplate !== undefined) {
        renderTemplate(this.passwordTemplate, context, probe);
      }
      if (unwritable) return false;
    }
    if (options.state !== undefined) {
      if (!this.renders.state) return false;
      if (type.state_countries && !type.state_countries.includes(options.country ?? "")) {
        return false;
      }
    }
    if (options.city !== undefined) {
      if (!this.renders.city) return false;
      if (type.city_countries && !type.city_countries.includes(options.country ?? "")) return false;
    }
    return true;
  }
}
