/** Loads one API answer for a component, again when its inputs change or `reload` is called. */
import { useCallback, useEffect, useState } from "preact/hooks";
import { api, type ApiError, type RequestOptions } from "../api/client.ts";

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload(): void;
}

export function useApi<T>(
  path: string | null,
  query?: RequestOptions["query"],
  refreshMs?: number,
): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(path !== null);
  const [round, setRound] = useState(0);
  const key = JSON.stringify(query ?? {});

  useEffect(() => {
    if (path === null) return;
    const abort = new AbortController();
    setLoading(true);
    api<T>("GET", path, { query, signal: abort.signal })
      .then((answer) => {
        setData(answer);
        setError(undefined);
      })
      .catch((failure) => {
        if ((failure as Error).name !== "AbortError") setError(failure as ApiError);
      })
      .finally(() => {
        if (!abort.signal.aborted) setLoading(false);
      });
    return () => abort.abort();
  }, [path, key, round]);

  useEffect(() => {
    if (!refreshMs || path === null) return;
    const timer = setInterval(() => setRound((n) => n + 1), refreshMs);
    return () => clearInterval(timer);
  }, [path, refreshMs]);

  const reload = useCallback(() => setRound((n) => n + 1), []);
  return { data, error, loading, reload };
}
