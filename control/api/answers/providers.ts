/** The provider catalogue as the API answers it (control/api/routes/providers.ts). */
import * as v from "valibot";
import { PROXY_SCHEMES } from "../../../shared/roles.ts";
import {
  DESCRIPTOR_SOURCES,
  FieldSchema,
  PROVIDER_MODES,
} from "../../../shared/vendors/descriptor.ts";
import { count, jsonObject, timestamp } from "./common.ts";

/** A field of a descriptor's forms: the descriptor's own field schema. */
export const ProviderFieldAnswer = FieldSchema;
export type ProviderField = v.InferOutput<typeof ProviderFieldAnswer>;

/** A proxy type as the catalogue shows it: what a form needs and what each renders. */
export const ProviderTypeAnswer = v.strictObject({
  id: v.string(),
  name: v.string(),
  mode: v.picklist(PROVIDER_MODES),
  scheme: v.picklist(PROXY_SCHEMES),
  host: v.nullable(v.string()),
  port: v.nullable(count),
  dynamic_sessions: v.boolean(),
  countries: v.nullable(v.array(v.string())),
  state_countries: v.nullable(v.array(v.string())),
  city_countries: v.nullable(v.array(v.string())),
  session_time: v.nullable(v.strictObject({
    unit: v.picklist(["minutes", "seconds"]),
    min_minutes: count,
    max_minutes: count,
    default_minutes: v.optional(count),
  })),
  /** Slots a connector of this type may ask for, at most. */
  max_slots: count,
  renders: v.strictObject({
    country: v.boolean(),
    state: v.boolean(),
    city: v.boolean(),
    session_time: v.boolean(),
  }),
});
export type ProviderType = v.InferOutput<typeof ProviderTypeAnswer>;

const PROVIDER_FIELDS = {
  id: v.string(),
  name: v.string(),
  description: v.string(),
  docs_url: v.nullable(v.string()),
  beta: v.boolean(),
  source: v.picklist(DESCRIPTOR_SOURCES),
  version: count,
  credential_fields: v.array(ProviderFieldAnswer),
  connector_fields: v.array(ProviderFieldAnswer),
  proxy_types: v.array(ProviderTypeAnswer),
  /** Every host the descriptor's calls reach. */
  egress_hosts: v.array(v.string()),
  /** The descriptor says how to check a credential with the vendor. */
  checks_credentials: v.boolean(),
};

export const ProviderAnswer = v.strictObject(PROVIDER_FIELDS);
export type ProviderRecord = v.InferOutput<typeof ProviderAnswer>;

export const ProviderListAnswer = v.array(ProviderAnswer);

/** GET /providers/{id}: the entry with the whole descriptor as stored. */
export const ProviderDetailAnswer = v.strictObject({ ...PROVIDER_FIELDS, descriptor: jsonObject });
export type ProviderDetail = ProviderRecord & {
  descriptor: {
    proxy_types: { id: string; call?: unknown; discovery?: unknown }[];
    [key: string]: unknown;
  };
};

export const ProviderDeletedAnswer = v.strictObject({
  deleted: v.string(),
  /** Connectors of the provider, left without a descriptor. */
  orphaned_connectors: v.array(v.string()),
});

export const ProviderHistoryAnswer = v.array(v.strictObject({
  version: count,
  /** created, updated or deleted. */
  action: v.string(),
  /** The admin who did it. */
  actor: v.string(),
  at: timestamp,
  /** The descriptor as saved; null for a delete. */
  descriptor: v.nullable(jsonObject),
}));
