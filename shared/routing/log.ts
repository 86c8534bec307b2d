/** The little the routing core says: warnings the operator should see once, never per request. */
export interface CoreLog {
  warn(message: string, fields?: Readonly<Record<string, unknown>>): void;
}

/** Used when the caller gives none: the console is on every runtime. */
export const consoleLog: CoreLog = {
  warn: (message, fields) => console.warn(message, fields ?? ""),
};
