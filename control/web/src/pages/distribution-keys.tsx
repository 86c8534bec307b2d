/**
 * A project's distribution keys: the keys that open its extraction API and nothing else. The
 * list (name, first characters, allowed client blocks, expiry, last use, revoked), a new key
 * (name, allowed CIDRs, expiry) shown this once with a plain warning of what it hands out, and
 * revoking one after a second click (editors).
 */
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import type { DistributionKey } from "../../../api/answers/distribution-keys.ts";
import { useSession } from "../session.tsx";
import { Field, FormError, parseList, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const RAW_CREDENTIALS_WARNING = "Whoever holds a key can take proxies from this project's " +
  "pools, with their addresses and passwords, and use them directly, outside the " +
  "gateway's limits, quotas, routing and metering, for as long as each proxy lives. Bind it " +
  "to the addresses it is used from, give it an end, and revoke it the moment it may have " +
  "leaked.";

export function DistributionKeys({ projectId }: { projectId: string }) {
  const session = useSession();
  const path = `/projects/${projectId}/distribution-keys`;
  const keys = useApi<DistributionKey[]>(path);
  const [made, setMade] = useState<DistributionKey | undefined>();
  const [confirming, setConfirming] = useState<string | undefined>();
  const [revokeError, setRevokeError] = useState<ApiError | undefined>();

  const revoke = async (key: DistributionKey) => {
    setRevokeError(undefined);
    try {
      await api("DELETE", `${path}/${key.id}`);
      setConfirming(undefined);
    } catch (failure) {
      setRevokeError(failure as ApiError);
    }
    keys.reload();
  };

  return (
    <section class="distribution-keys">
      <header class="toolbar">
        <h2>Distribution keys</h2>
      </header>
      <p class="muted">
        For the extraction API of this project only (<code>
          POST /api/v1/projects/{projectId}
          /extract
        </code>, with <code>Authorization: Bearer oxd_…</code> or{" "}
        <code>X-API-Key</code>). A key opens no admin route.
      </p>
      <p class="warning-text" data-raw-warning>
        <strong>Extraction hands out raw proxy credentials.</strong> {RAW_CREDENTIALS_WARNING}
      </p>
      {session.canEdit
        ? (made?.key ? <NewKeyBox made={made} onDone={() => setMade(undefined)} /> : (
          <NewKey
            path={path}
            onCreated={(key) => {
              setMade(key);
              keys.reload();
            }}
          />
        ))
        : null}
      <ErrorNote error={keys.error ?? revokeError} />
      <table class="data" aria-label="Distribution keys">
        <thead>
          <tr>
            <th>Name</th>
            <th>Starts with</th>
            <th>Allowed clients</th>
            <th>Status</th>
            <th>Created</th>
            <th>Expires</th>
            <th>Last used</th>
            <th>Revoked</th>
            {session.canEdit ? <th /> : null}
          </tr>
        </thead>
        <tbody>
          {(keys.data ?? []).map((key) => (
            <tr key={key.id} data-key={key.name}>
              <td>{key.name}</td>
              <td>
                <code>{key.prefix}…</code>
              </td>
              <td>
                {key.allowed_cidrs.length > 0
                  ? key.allowed_cidrs.join(", ")
                  : <span class="muted">any address</span>}
              </td>
              <td data-status>{statusOf(key)}</td>
              <td>
                <Time value={key.created_at} />
              </td>
              <td>{key.expires_at ? <Time value={key.expires_at} /> : "never"}</td>
              <td>{key.last_used_at ? <Time value={key.last_used_at} /> : "never"}</td>
              <td>{key.revoked_at ? <Time value={key.revoked_at} /> : "–"}</td>
              {session.canEdit
                ? (
                  <td class="row-actions">
                    {key.revoked_at ? null : confirming === key.id
                      ? (
                        <Fragment>
                          <button type="button" class="danger" onClick={() => revoke(key)}>
                            Revoke {key.name} now
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
                        <button
                          type="button"
                          class="secondary"
                          onClick={() => setConfirming(key.id)}
                        >
                          Revoke
                        </button>
                      )}
                  </td>
                )
                : null}
            </tr>
          ))}
        </tbody>
      </table>
      {keys.data?.length === 0 ? <p class="muted">No distribution keys yet.</p> : null}
    </section>
  );
}

function statusOf(key: DistributionKey) {
  if (key.revoked_at) return <span class="badge danger">revoked</span>;
  if (!key.active) return <span class="badge warning">expired</span>;
  return <span class="badge ok">active</span>;
}

/** A local time typed in the form (`datetime-local`) as the API's ISO 8601; blank: null. */
function expiryOf(text: string): string | null {
  if (text.trim() === "") return null;
  const date = new Date(text);
  // What does not read as a time is sent as typed, for the API to refuse in its words.
  return Number.isNaN(date.getTime()) ? text : date.toISOString();
}

function NewKey(
  { path, onCreated }: { path: string; onCreated: (key: DistributionKey) => void },
) {
  const [name, setName] = useState("");
  const [cidrs, setCidrs] = useState("");
  const [expires, setExpires] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const key = await api<DistributionKey>("POST", path, {
        body: { name, allowed_cidrs: parseList(cidrs), expires_at: expiryOf(expires) },
      });
      setName("");
      setCidrs("");
      setExpires("");
      onCreated(key);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-label="New distribution key" noValidate>
      <h3>New distribution key</h3>
      <FormError error={error} />
      <div class="grid">
        <Field label="Name" field="name" error={error} required hint="Who uses it: crawler…">
          <TextInput name="name" value={name} onInput={setName} required />
        </Field>
        <Field
          label="Allowed clients"
          field="allowed_cidrs"
          error={error}
          hint="CIDR blocks or addresses, one a line or comma-separated; blank: any address"
        >
          <TextInput name="allowed_cidrs" value={cidrs} onInput={setCidrs} multiline />
        </Field>
        <Field
          label="Expires"
          field="expires_at"
          error={error}
          hint="In your time zone; blank: until revoked"
        >
          <input
            name="expires_at"
            type="datetime-local"
            value={expires}
            onInput={(event) => setExpires((event.currentTarget as HTMLInputElement).value)}
          />
        </Field>
      </div>
      <button type="submit" disabled={busy}>{busy ? "Creating…" : "Create key"}</button>
    </form>
  );
}

function NewKeyBox({ made, onDone }: { made: DistributionKey; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(made.key ?? "");
      setCopied(true);
    } catch {
      // No clipboard (a page not on https or localhost): select it for a manual copy.
      (document.querySelector("[data-new-key]") as HTMLInputElement | null)?.select();
    }
  };
  return (
    <div class="card new-token" role="region" aria-label="New distribution key">
      <h3>Distribution key “{made.name}” created</h3>
      <p class="warning-text">
        <strong>Copy it now: you will not see it again.</strong>{" "}
        The server keeps only a digest of it; lost, it can only be revoked and replaced.
      </p>
      <p class="warning-text">
        Extraction hands out raw proxy credentials. {RAW_CREDENTIALS_WARNING}
      </p>
      <div class="copy-box">
        <input
          data-new-key
          readOnly
          value={made.key}
          aria-label="The new key"
          onFocus={(event) => (event.currentTarget as HTMLInputElement).select()}
        />
        <button type="button" onClick={copy}>{copied ? "Copied" : "Copy"}</button>
      </div>
      <button type="button" class="secondary" onClick={onDone}>Done</button>
    </div>
  );
}
