/**
 * The invitation's screen (`/set-password?token=…`, the link `POST /users/invite` answers): the
 * new password twice, sent with the link's token. Shown whether or not anyone is signed in; a
 * link used already or past its end says so in the API's words, and nothing changes.
 */
import { useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, ApiError } from "../api/client.ts";
import { Field, FieldError, FormError, TextInput } from "../ui/forms.tsx";

export function SetPassword() {
  const { query } = useLocation();
  const token = query.token ?? "";
  const [password, setPassword] = useState("");
  const [again, setAgain] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    if (password !== again) {
      setError(
        new ApiError(422, "The two passwords differ", [{
          field: "body.password",
          message: "differs from the second one typed",
        }]),
      );
      return;
    }
    setBusy(true);
    try {
      await api("POST", "/auth/set-password", { body: { token, password } });
      setDone(true);
      setError(undefined);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="sign-in">
      <form onSubmit={submit} class="card" aria-label="Set your password">
        <h1>Octoprox</h1>
        {done
          ? (
            <p role="status">
              Your password is set. <a href="/">Sign in</a> with it.
            </p>
          )
          : (
            <>
              <p class="muted">Choose the password you will sign in with.</p>
              <FormError error={error} />
              <FieldError error={error} field="token" />
              <Field label="New password" field="password" error={error}>
                <TextInput
                  name="password"
                  type="password"
                  value={password}
                  onInput={setPassword}
                />
              </Field>
              <Field label="New password again" field="password_again" error={error}>
                <TextInput name="password_again" type="password" value={again} onInput={setAgain} />
              </Field>
              <button type="submit" disabled={busy || token === ""}>
                {busy ? "Setting…" : "Set password"}
              </button>
              {token === ""
                ? <p class="muted">This link has no token: open the one you got.</p>
                : null}
            </>
          )}
      </form>
    </main>
  );
}
