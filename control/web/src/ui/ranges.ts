/** The history ranges the pages offer (the API's `range`), with their names. */
export const RANGES = [
  ["1h", "1 hour"],
  ["6h", "6 hours"],
  ["24h", "24 hours"],
  ["7d", "7 days"],
  ["30d", "30 days"],
] as const;
