/**
 * Users, for admins: the list with each one's role (changed in place), whether it may sign in
 * (deactivate and activate) and its removal; a form for a new user. What the API refuses (a
 * taken username, an admin's edit or removal of itself) is shown in its own words.
 */
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { USER_ROLES } from "../../../../shared/roles.ts";
import { api, type ApiError } from "../api/client.ts";
import type { UserRecord } from "../../../api/answers/users.ts";
import { useSession } from "../session.tsx";
import { Checkbox, Field, FormError, Select, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const ROLE_OPTIONS = USER_ROLES.map((role) => [role, role] as const);

export function Users() {
  const session = useSession();
  const users = useApi<UserRecord[]>("/users");
  const [creating, setCreating] = useState(false);
  const [rowError, setRowError] = useState<{ id: string; error: ApiError } | undefined>();
  const [confirming, setConfirming] = useState<string | undefined>();
  /** The invitation link made last (shown once: only its digest is stored). */
  const [link, setLink] = useState<{ username: string; url: string } | undefined>();

  if (users.error?.status === 403) {
    return (
      <section class="admins-only">
        <h2>Users</h2>
        <p role="alert">
          <strong>Admins only.</strong> {users.error.message}
        </p>
      </section>
    );
  }

  const act = async (user: UserRecord, method: string, body?: Record<string, unknown>) => {
    setRowError(undefined);
    try {
      await api(method, `/users/${user.id}`, { body });
      setConfirming(undefined);
    } catch (failure) {
      setRowError({ id: user.id, error: failure as ApiError });
    }
    users.reload();
  };

  return (
    <section class="users">
      <header class="toolbar">
        <h2>Users</h2>
        {creating
          ? null
          : <button type="button" onClick={() => setCreating(true)}>New user</button>}
      </header>
      <ErrorNote error={users.error} />
      {creating
        ? (
          <NewUser
            onCreated={(invited) => {
              setCreating(false);
              setLink(invited);
              users.reload();
            }}
            onCancel={() => setCreating(false)}
          />
        )
        : null}
      {link === undefined ? null : (
        <p class="card" role="status">
          Invitation for {link.username}, shown this once (it works once, for 7 days):{" "}
          <code data-testid="invite-url">{link.url}</code>
        </p>
      )}
      <table class="data" aria-label="Users">
        <thead>
          <tr>
            <th>Username</th>
            <th>Role</th>
            <th>Email</th>
            <th>Status</th>
            <th>Last sign-in</th>
            <th>Created</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(users.data ?? []).map((user) => {
            const self = user.id === session.user?.id;
            return (
              <Fragment key={user.id}>
                <tr data-user={user.username}>
                  <td>
                    {user.username}
                    {self ? <span class="badge">you</span> : null}
                  </td>
                  <td>
                    <Select
                      name={`role-${user.username}`}
                      value={user.role}
                      options={ROLE_OPTIONS}
                      onChange={(role) => act(user, "PATCH", { role })}
                    />
                  </td>
                  <td>{user.email ?? "–"}</td>
                  <td>
                    {user.is_active
                      ? <span class="badge ok">active</span>
                      : <span class="badge danger">deactivated</span>}
                  </td>
                  <td>
                    <Time value={user.last_login_at} />
                  </td>
                  <td>
                    <Time value={user.created_at} />
                  </td>
                  <td class="row-actions">
                    <button
                      type="button"
                      class="secondary"
                      onClick={async () => {
                        setRowError(undefined);
                        try {
                          const made = await api<{ invite_url: string }>(
                            "POST",
                            `/users/${user.id}/reinvite`,
                          );
                          setLink({ username: user.username, url: made.invite_url });
                        } catch (failure) {
                          setRowError({ id: user.id, error: failure as ApiError });
                        }
                      }}
                    >
                      New invitation
                    </button>
                    <button
                      type="button"
                      class="secondary"
                      onClick={() => act(user, "PATCH", { is_active: !user.is_active })}
                    >
                      {user.is_active ? "Deactivate" : "Activate"}
                    </button>
                    {confirming === user.id
                      ? (
                        <>
                          <button
                            type="button"
                            class="danger"
                            onClick={() => act(user, "DELETE")}
                          >
                            Delete {user.username} for good
                          </button>
                          <button
                            type="button"
                            class="secondary"
                            onClick={() => setConfirming(undefined)}
                          >
                            Keep
                          </button>
                        </>
                      )
                      : (
                        <button
                          type="button"
                          class="secondary"
                          onClick={() => {
                            setRowError(undefined);
                            setConfirming(user.id);
                          }}
                        >
                          Delete
                        </button>
                      )}
                  </td>
                </tr>
                {rowError?.id === user.id
                  ? (
                    <tr>
                      <td colSpan={7}>
                        <ErrorNote error={rowError.error} />
                      </td>
                    </tr>
                  )
                  : null}
              </Fragment>
            );
          })}
        </tbody>
      </table>
      <p class="muted">
        A role change or a deactivation takes effect on the user's next request, for their sign-in
        and their API tokens alike. Deleting a user deletes their API tokens too.
      </p>
    </section>
  );
}

function NewUser(
  { onCreated, onCancel }: {
    /** With the invitation's link when the user was invited. */
    onCreated: (invited?: { username: string; url: string }) => void;
    onCancel: () => void;
  },
) {
  const [state, setState] = useState({ username: "", password: "", role: "viewer", email: "" });
  const [invite, setInvite] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const set = (key: keyof typeof state) => (value: string) =>
    setState((old) => ({ ...old, [key]: value }));
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const email = state.email.trim() === "" ? null : state.email;
      if (invite) {
        const made = await api<{ invite_url: string }>("POST", "/users/invite", {
          body: { username: state.username, role: state.role, email },
        });
        onCreated({ username: state.username, url: made.invite_url });
        return;
      }
      await api("POST", "/users", { body: { ...state, email } });
      onCreated();
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-label="New user">
      <h3>New user</h3>
      <FormError error={error} />
      <div class="grid">
        <Field label="Username" field="username" error={error}>
          <TextInput name="username" value={state.username} onInput={set("username")} />
        </Field>
        {invite
          ? null
          : (
            <Field label="Password" field="password" error={error} hint="At least 8 characters">
              <TextInput
                name="password"
                type="password"
                value={state.password}
                onInput={set("password")}
              />
            </Field>
          )}
        <Field label="Role" field="role" error={error}>
          <Select name="role" value={state.role} onChange={set("role")} options={ROLE_OPTIONS} />
        </Field>
        <Field label="Email" field="email" error={error} hint="Optional">
          <TextInput name="email" type="email" value={state.email} onInput={set("email")} />
        </Field>
      </div>
      <Checkbox
        name="invite"
        checked={invite}
        onChange={setInvite}
        label="Invite: make a one-time link the user signs up through"
      />
      <div class="actions">
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : invite ? "Invite user" : "Create user"}
        </button>
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}
