/**
 * The provider catalogue (every role may read it): each descriptor with its source, version
 * and docs, its proxy types (mode, dynamic sessions, gateway, countries, what the templates
 * render of a request), the fields its credentials and connectors take, and the hosts its
 * calls reach. Vendor credentials and connectors are drawn from these.
 */
import { useEffect, useState } from "preact/hooks";
import type {
  ProviderField,
  ProviderRecord,
  ProviderType,
} from "../../../api/answers/providers.ts";
import { ErrorNote } from "../ui/status.tsx";
import { MODE_HELP, MODE_NAMES, rendersOf } from "../ui/providers.ts";
import { useApi } from "../ui/use-api.ts";

const SOURCES: Record<ProviderRecord["source"], string> = {
  builtin: "Shipped with Octoprox",
  file: "Read from OCTOPROX_PROVIDERS_DIR at start",
  custom: "Stored by an admin through the API",
};

function matches(provider: ProviderRecord, search: string): boolean {
  const words = search.trim().toLowerCase();
  if (words === "") return true;
  const text = [
    provider.id,
    provider.name,
    provider.description,
    provider.source,
    ...provider.proxy_types.flatMap((t) => [
      t.id,
      t.name,
      MODE_NAMES[t.mode],
      t.dynamic_sessions ? "dynamic sessions" : "",
    ]),
  ].join(" ").toLowerCase();
  return words.split(/\s+/).every((word) => text.includes(word));
}

export function Providers() {
  const providers = useApi<ProviderRecord[]>("/providers");
  const [search, setSearch] = useState("");
  const list = (providers.data ?? []).filter((p) => matches(p, search));
  // A link to one provider (`/providers#oxylabs`, from a connector) shows its card once loaded.
  useEffect(() => {
    const id = decodeURIComponent(location.hash.slice(1));
    if (providers.data && id) document.getElementById(id)?.scrollIntoView();
  }, [providers.data]);
  return (
    <section class="providers">
      <header class="toolbar">
        <h2>Providers</h2>
        <label>
          Search
          <input
            type="search"
            name="provider_search"
            value={search}
            placeholder="Name, type or mode"
            onInput={(event) => setSearch((event.currentTarget as HTMLInputElement).value)}
          />
        </label>
      </header>
      <p class="muted">
        The vendors this install can connect to. A vendor credential and a vendor connector (a
        project's Credentials and Connectors tabs) take the fields their provider names here.
      </p>
      <ErrorNote error={providers.error} />
      {providers.loading && !providers.data ? <p class="muted">Loading…</p> : null}
      {list.map((provider) => <ProviderCard key={provider.id} provider={provider} />)}
      {providers.data && list.length === 0
        ? <p class="muted">No provider matches “{search.trim()}”.</p>
        : null}
    </section>
  );
}

function ProviderCard({ provider }: { provider: ProviderRecord }) {
  const heading = `provider-${provider.id}`;
  return (
    <article class="card provider" id={provider.id} aria-labelledby={heading}>
      <header class="provider-header">
        <h3 id={heading}>{provider.name}</h3>
        <code class="muted">{provider.id}</code>
        <span class="badge" data-source={provider.source} title={SOURCES[provider.source]}>
          {provider.source}
        </span>
        <span class="badge muted" data-version>version {provider.version}</span>
        {provider.beta ? <span class="badge warning">beta</span> : null}
        {provider.docs_url
          ? (
            <a class="docs" href={provider.docs_url} target="_blank" rel="noreferrer noopener">
              Vendor docs ↗
            </a>
          )
          : null}
      </header>
      {provider.description ? <p>{provider.description}</p> : null}
      <table class="data provider-types" aria-label={`${provider.name} proxy types`}>
        <thead>
          <tr>
            <th>Proxy type</th>
            <th>Mode</th>
            <th>Dynamic sessions</th>
            <th>Gateway</th>
            <th>Countries</th>
            <th>Renders</th>
          </tr>
        </thead>
        <tbody>
          {provider.proxy_types.map((type) => <TypeRow key={type.id} type={type} />)}
        </tbody>
      </table>
      <dl class="provider-facts">
        <dt>Credential fields</dt>
        <dd>
          <FieldList fields={provider.credential_fields} />
        </dd>
        <dt>Connector fields</dt>
        <dd>
          <FieldList fields={provider.connector_fields} />
        </dd>
        <dt>Credentials checked</dt>
        <dd>
          {provider.checks_credentials
            ? "With the vendor, before a credential is stored"
            : "Against the fields only"}
        </dd>
        <dt>Calls reach</dt>
        <dd>
          {provider.egress_hosts.length > 0
            ? provider.egress_hosts.map((host, i) => (
              <span key={host}>
                {i > 0 ? ", " : null}
                <code>{host}</code>
              </span>
            ))
            : <span class="muted">no vendor API</span>}
        </dd>
      </dl>
    </article>
  );
}

/** After a port type's first port: its slots count up from it. */
const PORTS_UP = " and up";

function TypeRow({ type }: { type: ProviderType }) {
  const renders = rendersOf(type);
  return (
    <tr data-type={type.id}>
      <td>
        <strong>{type.name}</strong> <code class="muted">{type.id}</code>
      </td>
      <td>
        <span class="badge mode" data-mode={type.mode} title={MODE_HELP[type.mode]}>
          {MODE_NAMES[type.mode]}
        </span>
      </td>
      <td data-dynamic={String(type.dynamic_sessions)}>
        {type.dynamic_sessions
          ? <span class="badge ok">dynamic sessions</span>
          : <span class="muted">no</span>}
      </td>
      <td>
        {type.host
          ? <code>{`${type.host}${type.port ? `:${type.port}` : ""}`}</code>
          : <span class="muted">the vendor's list</span>}
        {type.mode === "port" && type.port ? <span class="muted">{PORTS_UP}</span> : null}
      </td>
      <td>{type.countries ? type.countries.join(", ") : "any"}</td>
      <td data-renders>{renders.length > 0 ? renders.join(", ") : "nothing"}</td>
    </tr>
  );
}

function FieldList({ fields }: { fields: readonly ProviderField[] }) {
  if (fields.length === 0) return <span class="muted">none</span>;
  return (
    <>
      {fields.map((field, i) => (
        <span key={field.key} title={field.help}>
          {i > 0 ? ", " : null}
          {field.label}
          {field.required ? <span class="required" aria-label="required">*</span> : null}{" "}
          <span class="muted">
            ({field.type}
            {field.secret ? ", secret" : ""})
          </span>
        </span>
      ))}
    </>
  );
}
