/** The Inspector's query: how many captures, and where a page continues. */
import * as v from "valibot";
import { STREAM_CAPS } from "../../shared/redis-keys.ts";
import { queryInteger } from "./common.ts";

/** A stream entry's id (`<ms>-<sequence>`, each part 64 bits), as `next_cursor` gives it. */
const STREAM_ID = /^\d{1,20}-\d{1,20}$/;
const U64_MAX = 2n ** 64n - 1n;

const NOT_A_CURSOR = "is not a cursor this API gave (next_cursor of a previous page)";

export function isStreamId(text: string): boolean {
  return STREAM_ID.test(text) && text.split("-").every((part) => BigInt(part) <= U64_MAX);
}

export const MitmCapturesQuery = v.object({
  count: queryInteger(1, STREAM_CAPS.mitmRequests, 50),
  cursor: v.optional(
    v.pipe(
      v.string(),
      v.description("The previous page's next_cursor: the page continues with older captures"),
      v.check(isStreamId, NOT_A_CURSOR),
    ),
  ),
});

/** Whether stream id `a` comes after `b`: ids order as (milliseconds, sequence). */
export function isNewerStreamId(a: string, b: string): boolean {
  const [am, as] = a.split("-").map(BigInt);
  const [bm, bs] = b.split("-").map(BigInt);
  return am > bm || (am === bm && as > bs);
}
