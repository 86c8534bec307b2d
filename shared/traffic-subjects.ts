/**
 * What a traffic decision is about: a connector (its traffic_config) or a project (its traffic
 * quota). One text form serves as the traffic job's key, the field of the blocks and pending
 * hashes and the runtime entry's ref, so every writer (gateway metering, the api, index
 * hygiene, the job) and reader (the feed's compile, the api) agree: a connector is its id, a
 * project `project:<id>`.
 */

export type TrafficSubjectKind = "connector" | "project";

export interface TrafficSubject {
  kind: TrafficSubjectKind;
  id: string;
}

const PROJECT = "project:";

export function trafficSubjectKey(subject: TrafficSubject): string {
  return subject.kind === "project" ? `${PROJECT}${subject.id}` : subject.id;
}

export function connectorSubject(id: string): string {
  return id;
}

export function projectSubject(id: string): string {
  return `${PROJECT}${id}`;
}

/** The subject a key names; undefined for text that names none. */
export function parseTrafficSubject(key: string): TrafficSubject | undefined {
  if (key.startsWith(PROJECT)) {
    const id = key.slice(PROJECT.length);
    return id === "" || id.includes(":") ? undefined : { kind: "project", id };
  }
  return key === "" || key.includes(":") ? undefined : { kind: "connector", id: key };
}
