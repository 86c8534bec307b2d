import { useState } from "preact/hooks";
import type { ApiError } from "../api/client.ts";
import { useSession } from "../session.tsx";
import { Field, FormError, TextInput } from "../ui/forms.tsx";

export function SignIn() {
  const session = useSession();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    try {
      await session.signIn(username, password);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="sign-in">
      <form onSubmit={submit} class="card" aria-label="Sign in">
        <h1>Octoprox</h1>
        <FormError error={error} />
        <Field label="Username" field="username" error={error}>
          <TextInput name="username" value={username} onInput={setUsername} />
        </Field>
        <Field label="Password" field="password" error={error}>
          <TextInput name="password" type="password" value={password} onInput={setPassword} />
        </Field>
        <button type="submit" disabled={busy}>{busy ? "Signing in…" : "Sign in"}</button>
      </form>
    </main>
  );
}
