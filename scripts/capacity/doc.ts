/**
 * docs/capacity.md carries what `npm run capacity` prints, between two markers, so the page
 * shows the sizing of the committed record and nothing typed by hand; tests/docs/capacity.test.ts
 * fails when the two differ, and `npm run capacity -- --write` puts the current one in.
 */
import { join } from "node:path";
import { ROOT } from "../gateway-command.ts";

export const CAPACITY_PAGE = join(ROOT, "docs", "capacity.md");

export const BLOCK_START =
  "<!-- capacity: printed by `npm run capacity` from docs/measured/bench-latest.json -->";
export const BLOCK_END = "<!-- capacity: end -->";

/** The block as the page holds it: the markers around the output in a fenced text block. */
export function capacityBlock(output: string): string {
  return `${BLOCK_START}\n\n\`\`\`text\n${output}\n\`\`\`\n\n${BLOCK_END}`;
}

function bounds(page: string): { start: number; end: number } {
  const start = page.indexOf(BLOCK_START);
  const end = page.indexOf(BLOCK_END);
  if (start < 0 || end < start) {
    throw new Error(`docs/capacity.md lacks the markers ${BLOCK_START} … ${BLOCK_END}`);
  }
  return { start, end: end + BLOCK_END.length };
}

/** The block the page holds now, markers included. */
export function blockOf(page: string): string {
  const { start, end } = bounds(page);
  return page.slice(start, end);
}

/** `page` with its block replaced by `output`'s. */
export function withBlock(page: string, output: string): string {
  const { start, end } = bounds(page);
  return page.slice(0, start) + capacityBlock(output) + page.slice(end);
}
