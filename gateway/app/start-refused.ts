/**
 * Why the process will not serve, found before the listeners bind (strict mode's open project,
 * access/strict-mode.ts): `RoutingCore.firstApplied` rejects with it, and the process stops with
 * exit code 1 after one fatal line of this message and fields. In a file of its own: the routing
 * core's strict-mode check (feed-strict-mode.ts) raises it, and the process (gateway.ts) reads it.
 */
export class StartRefused extends Error {
  readonly fields: Readonly<Record<string, unknown>>;
  constructor(message: string, fields: Readonly<Record<string, unknown>>) {
    super(message);
    this.name = "StartRefused";
    this.fields = fields;
  }
}
