/**
 * Deleting something that takes more with it: the button opens only once its name is typed
 * exactly; then the API's DELETE, and the page goes where it says (or hears it, for a deletion
 * that takes a while). A refusal is shown in words.
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, type ApiError } from "../api/client.ts";
import { ErrorNote } from "./status.tsx";

export function TypedDelete(
  { what, name, path, then, onDeleted, children }: {
    /** "project", "connector": in the title, the button and the field's label. */
    what: string;
    /** What must be typed. */
    name: string;
    /** The API path to DELETE. */
    path: string;
    /** Where the page goes once deleted. */
    then: string;
    /** Called instead of going to `then`: the API took the deletion (a 202 that takes a while). */
    onDeleted?: () => void;
    /** What goes with it, in words. */
    children: ComponentChildren;
  },
) {
  const { route } = useLocation();
  const [typed, setTyped] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const remove = async (event: Event) => {
    event.preventDefault();
    try {
      await api("DELETE", path);
      if (onDeleted) onDeleted();
      else route(then);
    } catch (failure) {
      setError(failure as ApiError);
    }
  };
  const label = what.charAt(0).toUpperCase() + what.slice(1);
  return (
    <form class="card danger-zone" onSubmit={remove} aria-label={`Delete ${what}`}>
      <h3>Delete this {what}</h3>
      <p>
        {children} Type <code>{name}</code> to confirm.
      </p>
      <ErrorNote error={error} />
      <input
        name="confirm"
        value={typed}
        onInput={(event) => setTyped((event.currentTarget as HTMLInputElement).value)}
        aria-label={`${label} name to confirm`}
      />
      <button type="submit" class="danger" disabled={typed !== name}>
        Delete {what}
      </button>
    </form>
  );
}
