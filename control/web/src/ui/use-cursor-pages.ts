/**
 * A list the API pages by cursor (`{items, next_cursor}`), newest first: the first page loads,
 * and again whenever the query or `reload` changes it; `more` appends the next, older page.
 * Such lists are never counted, so there is no page number, only "Load more".
 */
import { useEffect, useState } from "preact/hooks";
import { api, type ApiError, type RequestOptions } from "../api/client.ts";

export interface CursorPages<T> {
  items: T[];
  /** Null at the end. */
  cursor: string | null;
  error: ApiError | undefined;
  loading: boolean;
  more(): void;
  reload(): void;
}

export function useCursorPages<T>(
  path: string,
  query: NonNullable<RequestOptions["query"]>,
): CursorPages<T> {
  const [items, setItems] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | undefined>();
  const [loading, setLoading] = useState(false);
  const [round, setRound] = useState(0);
  const key = JSON.stringify(query);

  const load = async (after: string | null, signal?: AbortSignal) => {
    setLoading(true);
    try {
      const page = await api<{ items: T[]; next_cursor: string | null }>("GET", path, {
        query: { ...query, cursor: after ?? undefined },
        signal,
      });
      setItems((old) => (after === null ? page.items : [...old, ...page.items]));
      setCursor(page.next_cursor);
      setError(undefined);
    } catch (failure) {
      if ((failure as Error).name !== "AbortError") setError(failure as ApiError);
    } finally {
      if (!signal?.aborted) setLoading(false);
    }
  };

  // A new query starts again from the newest.
  useEffect(() => {
    const abort = new AbortController();
    setItems([]);
    setCursor(null);
    load(null, abort.signal);
    return () => abort.abort();
  }, [path, key, round]);

  return {
    items,
    cursor,
    error,
    loading,
    more: () => {
      if (cursor !== null) load(cursor);
    },
    reload: () => setRound((n) => n + 1),
  };
}
