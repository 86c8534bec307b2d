/** The "Load more" of a list paged by cursor (use-cursor-pages.ts): shown while there is more. */
import type { CursorPages } from "./use-cursor-pages.ts";

export function LoadMore(
  { pages }: { pages: Pick<CursorPages<unknown>, "cursor" | "loading" | "more"> },
) {
  return (
    <div class="actions">
      {pages.cursor
        ? (
          <button type="button" class="secondary" disabled={pages.loading} onClick={pages.more}>
            {pages.loading ? "Loading…" : "Load more"}
          </button>
        )
        : null}
    </div>
  );
}
