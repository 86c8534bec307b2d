/**
 * A project's credentials: the list (provider, the login it holds with secrets shown as set or
 * not, the connectors using it), a new one (editors), and one credential's page
 * (`/projects/:id/credentials/:cid`): every field of its provider, and its deletion (refused in
 * the API's words while a connector uses it).
 */
import { useEffect, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api } from "../api/client.ts";
import type { Connector } from "../../../api/answers/connectors.ts";
import type { Credential } from "../../../api/answers/credentials.ts";
import type { ProviderRecord } from "../../../api/answers/providers.ts";
import { useSession } from "../session.tsx";
import { providerName } from "../ui/providers.ts";
import { cloudName, isCloudProvider } from "../ui/clouds.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { TypedDelete } from "../ui/typed-delete.tsx";
import { useApi } from "../ui/use-api.ts";
import {
  credentialFields,
  CredentialForm,
  PROVIDER_API_PROVIDER,
  STATIC_PROVIDER,
} from "./credential-form.tsx";

export function Credentials(
  { projectId, credentialId }: { projectId: string; credentialId?: string },
) {
  if (credentialId) return <CredentialPage projectId={projectId} credentialId={credentialId} />;
  return <CredentialList projectId={projectId} />;
}

function CredentialList({ projectId }: { projectId: string }) {
  const session = useSession();
  const { route, query } = useLocation();
  const loaded = useApi<Credential[]>(`/projects/${projectId}/credentials`);
  const connectors = useApi<Connector[]>(`/projects/${projectId}/connectors`);
  const providers = useApi<ProviderRecord[]>("/providers");
  // `?new=<provider>` (a connector form's link) opens the form with that provider chosen.
  const [creating, setCreating] = useState(query.new !== undefined);
  const catalogue = providers.data ?? [];

  const create = async (body: Record<string, unknown>) => {
    const credential = await api<Credential>("POST", `/projects/${projectId}/credentials`, {
      body,
    });
    route(`/projects/${projectId}/credentials/${credential.id}`);
  };

  const list = loaded.data ?? [];
  return (
    <section>
      <header class="toolbar">
        <h2>Credentials</h2>
        {session.canEdit && !creating
          ? <button type="button" onClick={() => setCreating(true)}>New credential</button>
          : null}
      </header>
      <p class="muted">
        A static credential is a default login for the proxies of a list; a vendor credential is the
        account its vendor connectors use (see{" "}
        <a href="/providers">Providers</a>); a cloud credential (AWS, GCP, Azure) is the account
        cloud connectors run instances with.
      </p>
      <ErrorNote error={loaded.error} />
      <ErrorNote error={providers.error} />
      {creating && session.canEdit
        ? (
          <div class="card">
            <h3>New credential</h3>
            {providers.data
              ? (
                <CredentialForm
                  providers={catalogue}
                  readOnly={false}
                  onSubmit={create}
                  submitLabel="Create credential"
                  initialProvider={catalogue.some((p) => p.id === query.new) ||
                      query.new === PROVIDER_API_PROVIDER || isCloudProvider(query.new ?? "")
                    ? query.new
                    : undefined}
                />
              )
              : <p class="muted">Loading the providers…</p>}
            <button type="button" class="secondary" onClick={() => setCreating(false)}>
              Cancel
            </button>
          </div>
        )
        : null}
      <table class="data credentials" aria-label="Credentials">
        <thead>
          <tr>
            <th>Name</th>
            <th>Provider</th>
            <th>Login</th>
            <th>Secrets</th>
            <th>Used by</th>
            <th>Updated</th>
          </tr>
        </thead>
        <tbody>
          {list.map((credential) => (
            <CredentialRow
              key={credential.id}
              projectId={projectId}
              credential={credential}
              providers={catalogue}
              users={(connectors.data ?? []).filter((c) => c.credential_id === credential.id)}
            />
          ))}
        </tbody>
      </table>
      {loaded.data?.length === 0 ? <p class="muted">No credentials yet.</p> : null}
    </section>
  );
}

function CredentialRow(
  { projectId, credential, providers, users }: {
    projectId: string;
    credential: Credential;
    providers: readonly ProviderRecord[];
    users: readonly Connector[];
  },
) {
  const fields = credentialFields(credential.provider, providers, credential.config);
  const plain = fields.filter((f) => !f.secret && credential.config[f.key] !== undefined);
  const secrets = fields.filter((f) => f.secret);
  return (
    <tr data-credential={credential.name}>
      <td>
        <a href={`/projects/${projectId}/credentials/${credential.id}`}>{credential.name}</a>
      </td>
      <td>
        {credential.provider === STATIC_PROVIDER
          ? "static"
          : isCloudProvider(credential.provider)
          ? cloudName(credential.provider)
          : providerName(providers, credential.provider)}
      </td>
      <td>
        {plain.length > 0
          ? plain.map((f, i) => (
            <span key={f.key}>
              {i > 0 ? ", " : null}
              <span class="muted">{f.label}:</span> <code>{String(credential.config[f.key])}</code>
            </span>
          ))
          : <span class="muted">–</span>}
      </td>
      <td>
        {secrets.length > 0
          ? secrets.map((f) => (
            <span
              key={f.key}
              class={`badge ${credential[`has_${f.key}`] ? "ok" : "muted"}`}
              data-secret={f.key}
            >
              {f.label} {credential[`has_${f.key}`] ? "set" : "not set"}
            </span>
          ))
          : <span class="muted">–</span>}
      </td>
      <td>
        {users.length > 0
          ? users.map((c, i) => (
            <span key={c.id}>
              {i > 0 ? ", " : null}
              <a href={`/projects/${projectId}/connectors/${c.id}`}>{c.name}</a>
            </span>
          ))
          : <span class="muted">no connector</span>}
      </td>
      <td>
        <Time value={credential.updated_at} />
      </td>
    </tr>
  );
}

function CredentialPage({ projectId, credentialId }: { projectId: string; credentialId: string }) {
  const session = useSession();
  const path = `/projects/${projectId}/credentials/${credentialId}`;
  const loaded = useApi<Credential>(path);
  const providers = useApi<ProviderRecord[]>("/providers");
  const connectors = useApi<Connector[]>(`/projects/${projectId}/connectors`);
  const [credential, setCredential] = useState<Credential | undefined>();
  useEffect(() => setCredential(loaded.data), [loaded.data]);

  if (loaded.error && !credential) return <ErrorNote error={loaded.error} />;
  if (!credential || !providers.data) return <p class="muted">Loading…</p>;

  const save = async (body: Record<string, unknown>) => {
    const stored = await api<Credential>("PATCH", path, { body });
    setCredential(stored);
    return stored;
  };
  const users = (connectors.data ?? []).filter((c) => c.credential_id === credential.id);
  const vendor = credential.provider !== STATIC_PROVIDER;

  return (
    <section>
      <p>
        <a href={`/projects/${projectId}/credentials`}>← All credentials</a>
      </p>
      <header class="toolbar">
        <h2>{credential.name}</h2>
        <span class="muted">
          {isCloudProvider(credential.provider)
            ? cloudName(credential.provider)
            : vendor
            ? providerName(providers.data, credential.provider)
            : "static"} credential
        </span>
      </header>
      <p>
        {users.length > 0
          ? (
            <>
              Used by {users.map((c, i) => (
                <span key={c.id}>
                  {i > 0 ? ", " : null}
                  <a href={`/projects/${projectId}/connectors/${c.id}`}>{c.name}</a>
                </span>
              ))}
              .
            </>
          )
          : <span class="muted">No connector uses it.</span>} {session.canEdit && vendor
          ? (
            <a href={`/projects/${projectId}/connectors?new=${credential.id}`}>
              New connector on this credential
            </a>
          )
          : null}
      </p>
      <ErrorNote error={providers.error} />
      <CredentialForm
        key={credential.id}
        credential={credential}
        providers={providers.data}
        readOnly={!session.canEdit}
        onSubmit={save}
        submitLabel="Save changes"
      />
      {session.canEdit
        ? (
          <TypedDelete
            what="credential"
            name={credential.name}
            path={path}
            then={`/projects/${projectId}/credentials`}
          >
            {users.length > 0
              ? "The API refuses while a connector uses it: delete or move those first."
              : "No connector uses it."}
          </TypedDelete>
        )
        : null}
    </section>
  );
}
