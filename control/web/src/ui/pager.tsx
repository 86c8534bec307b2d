/**
 * Pages of a counted list (`{items, total, page, page_size}`): Previous and Next, where the page
 * is in the whole, and how many rows a page. One pager, so every paged list reads alike.
 */
import { formatCount } from "./format.ts";
import { Select } from "./forms.tsx";

const PAGE_SIZES = [["25", "25"], ["50", "50"], ["100", "100"], ["250", "250"]] as const;

export function Pager(
  { page, pageSize, total, noun, onPage, onPageSize }: {
    page: number;
    pageSize: number;
    total: number;
    /** What the rows are, plural ("proxies"). */
    noun: string;
    onPage: (page: number) => void;
    onPageSize: (size: number) => void;
  },
) {
  const pages = Math.max(1, Math.ceil(total / pageSize));
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        class="secondary"
        disabled={page <= 1}
        onClick={() => onPage(page - 1)}
      >
        Previous
      </button>
      <span class="page-of">
        Page {formatCount(page)} of {formatCount(pages)} ({formatCount(total)} {noun})
      </span>
      <button
        type="button"
        class="secondary"
        disabled={page >= pages}
        onClick={() => onPage(page + 1)}
      >
        Next
      </button>
      <label class="page-size">
        Rows a page
        <Select
          name="page_size"
          value={String(pageSize)}
          onChange={(value) => onPageSize(Number(value))}
          options={PAGE_SIZES}
        />
      </label>
    </nav>
  );
}
