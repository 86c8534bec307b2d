/**
 * The signed-in user's API tokens: the list (by name and prefix, never the secret), a new one
 * (a name and an optional life in days) whose token is shown this once in a box to copy, and
 * revoking one. A token acts with its owner's role.
 */
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import type { ApiToken } from "../../../api/answers/users.ts";
import { Field, FormError, optionalNumber, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

export function Tokens() {
  const tokens = useApi<ApiToken[]>("/tokens");
  const [made, setMade] = useState<ApiToken | undefined>();
  const [confirming, setConfirming] = useState<string | undefined>();
  const [revokeError, setRevokeError] = useState<ApiError | undefined>();

  const revoke = async (token: ApiToken) => {
    setRevokeError(undefined);
    try {
      await api("DELETE", `/tokens/${token.id}`);
      setConfirming(undefined);
    } catch (failure) {
      setRevokeError(failure as ApiError);
    }
    tokens.reload();
  };

  return (
    <section class="tokens">
      <header class="toolbar">
        <h2>API tokens</h2>
      </header>
      <p class="muted">
        For scripts and the CLI: send <code>Authorization: Bearer &lt;token&gt;</code> to{" "}
        <code>/api/v1</code>. A token acts with your role, and stops working when revoked, when it
        expires, or when your account is deactivated.
      </p>
      {made?.token ? <NewTokenBox token={made} onDone={() => setMade(undefined)} /> : (
        <NewToken
          onCreated={(token) => {
            setMade(token);
            tokens.reload();
          }}
        />
      )}
      <ErrorNote error={tokens.error ?? revokeError} />
      <table class="data" aria-label="API tokens">
        <thead>
          <tr>
            <th>Name</th>
            <th>Starts with</th>
            <th>Status</th>
            <th>Created</th>
            <th>Expires</th>
            <th>Last used</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(tokens.data ?? []).map((token) => (
            <tr key={token.id} data-token={token.name}>
              <td>{token.name}</td>
              <td>
                <code>{token.prefix}…</code>
              </td>
              <td>{statusOf(token)}</td>
              <td>
                <Time value={token.created_at} />
              </td>
              <td>{token.expires_at ? <Time value={token.expires_at} /> : "never"}</td>
              <td>
                <Time value={token.last_used_at} />
              </td>
              <td class="row-actions">
                {!token.active ? null : confirming === token.id
                  ? (
                    <Fragment>
                      <button type="button" class="danger" onClick={() => revoke(token)}>
                        Revoke {token.name} now
                      </button>
                      <button
                        type="button"
                        class="secondary"
                        onClick={() => setConfirming(undefined)}
                      >
                        Keep
                      </button>
                    </Fragment>
                  )
                  : (
                    <button type="button" class="secondary" onClick={() => setConfirming(token.id)}>
                      Revoke
                    </button>
                  )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {tokens.data?.length === 0 ? <p class="muted">No API tokens yet.</p> : null}
    </section>
  );
}

function statusOf(token: ApiToken) {
  if (token.revoked_at) return <span class="badge danger">revoked</span>;
  if (!token.active) return <span class="badge warning">expired</span>;
  return <span class="badge ok">active</span>;
}

function NewToken({ onCreated }: { onCreated: (token: ApiToken) => void }) {
  const [name, setName] = useState("");
  const [days, setDays] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, unknown> = { name };
      const life = optionalNumber(days);
      if (life !== null) body.expires_in_days = life;
      const token = await api<ApiToken>("POST", "/tokens", { body });
      setName("");
      setDays("");
      onCreated(token);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-label="New API token">
      <h3>New API token</h3>
      <FormError error={error} />
      <div class="grid">
        <Field label="Name" field="name" error={error} hint="What it is for: ci, backup…">
          <TextInput name="name" value={name} onInput={setName} />
        </Field>
        <Field
          label="Expires after (days)"
          field="expires_in_days"
          error={error}
          hint="1 to 3650; blank: until revoked"
        >
          <TextInput name="expires_in_days" type="number" value={days} onInput={setDays} />
        </Field>
      </div>
      <button type="submit" disabled={busy}>{busy ? "Creating…" : "Create token"}</button>
    </form>
  );
}

function NewTokenBox({ token, onDone }: { token: ApiToken; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(token.token ?? "");
      setCopied(true);
    } catch {
      // No clipboard (a page not on https or localhost): select it for a manual copy.
      (document.querySelector("[data-new-token]") as HTMLInputElement | null)?.select();
    }
  };
  return (
    <div class="card new-token" role="region" aria-label="New token">
      <h3>Token “{token.name}” created</h3>
      <p class="warning-text">
        <strong>Copy it now: you will not see it again.</strong>{" "}
        The server keeps only a hash of it; lost, it can only be revoked and replaced.
      </p>
      <div class="copy-box">
        <input
          data-new-token
          readOnly
          value={token.token}
          aria-label="The new token"
          onFocus={(event) => (event.currentTarget as HTMLInputElement).select()}
        />
        <button type="button" onClick={copy}>{copied ? "Copied" : "Copy"}</button>
      </div>
      <button type="button" class="secondary" onClick={onDone}>Done</button>
    </div>
  );
}
