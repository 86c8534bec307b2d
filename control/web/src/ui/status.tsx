import type { ApiError } from "../api/client.ts";

/** An API failure, in its own words. */
export function ErrorNote({ error }: { error?: ApiError }) {
  if (!error) return null;
  return <div class="form-error" role="alert">{error.message}</div>;
}
