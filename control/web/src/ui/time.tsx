import { localTime } from "./format.ts";

/** A time in the browser's zone, the UTC value on hover. */
export function Time({ value }: { value: string | null | undefined }) {
  const { text, utc } = localTime(value);
  return <time dateTime={value ?? undefined} title={utc}>{text}</time>;
}
