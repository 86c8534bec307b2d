/**
 * A form's state and its save: the typed values, each field's setter, and a submit that sends
 * the body, refills the values from what the API stored, and keeps the API's refusal for the
 * fields to show (ui/forms.tsx). One hook for every edit form of the dashboard.
 */
import { useState } from "preact/hooks";
import type { ApiError } from "../api/client.ts";

export interface FormControl<S> {
  state: S;
  set<K extends keyof S>(key: K): (value: S[K]) => void;
  error: ApiError | undefined;
  busy: boolean;
  saved: boolean;
  submit(event: Event): Promise<void>;
}

export function useForm<S, R>(
  /** The values from the stored entity (undefined: a new one). */
  stateOf: (stored: R | undefined) => S,
  stored: R | undefined,
  bodyOf: (state: S) => Record<string, unknown>,
  /** Saves; the entity as stored, when the form stays on the page, refills it. */
  onSubmit: (body: Record<string, unknown>) => Promise<R | void>,
): FormControl<S> {
  const [state, setState] = useState<S>(() => stateOf(stored));
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(false);
  return {
    state,
    error,
    busy,
    saved,
    set: (key) => (value) => {
      setSaved(false);
      setState((old) => ({ ...old, [key]: value }));
    },
    async submit(event) {
      event.preventDefault();
      setBusy(true);
      setError(undefined);
      try {
        const result = await onSubmit(bodyOf(state));
        if (result) setState(stateOf(result));
        setSaved(true);
      } catch (failure) {
        setError(failure as ApiError);
      } finally {
        setBusy(false);
      }
    },
  };
}
