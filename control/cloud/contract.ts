/**
 * The one interface the scale job drives a cloud through. AWS, GCP and Azure each implement it
 * (aws.ts, gcp.ts, azure.ts) over their own SDK, so nothing above knows which cloud it is.
 *
 * An instance is known two ways: by its creation name (naming.ts), which the creating hash keys
 * its entries by and which is AWS's client token, and by its id as a proxy row holds it
 * (`aws-<instance id>`, `gcp-<name>`, `azure-<name>`), which rows are matched and terminations
 * addressed by.
 */
import type { CloudProvider } from "../model/cloud.ts";

export type { CloudProvider };

/** The one tag (AWS), label (GCP) or tag (Azure) every instance carries: its connector's id. */
export const CONNECTOR_TAG = "octoprox-connector";

export interface CloudLaunch {
  /** The creation name: the AWS client token, the GCP and Azure instance (VM) name. */
  name: string;
  /** The connector's id: the value of the CONNECTOR_TAG. */
  connectorId: string;
  /** The connector's own tags (labels on GCP); the connector tag is added and never replaced. */
  tags: Readonly<Record<string, string>>;
  /**
   * The start-up script (AWS user data, GCP `startup-script` metadata, Azure custom data): the
   * one place the instance's proxy credentials travel. No tag, label or other item holds them.
   */
  startupScript: string;
}

/** An instance as a listing or a create shows it. */
export interface CloudInstance {
  /** The creation name. */
  name: string;
  /** The id a proxy row holds: `aws-<instance id>`, `gcp-<name>`, `azure-<name>`. */
  id: string;
  /** Listings hold pending and running instances only (Azure's VM list has no power state). */
  state: "pending" | "running";
  /** The public IPv4 address, once the cloud gave one. */
  address: string | null;
}

export interface CloudClient {
  readonly provider: CloudProvider;
  /**
   * One listing call: the connector's pending and running instances, by its CONNECTOR_TAG
   * (AWS one DescribeInstances by tag, GCP one instances.list with a label filter, Azure one VM
   * list of the resource group, VMs only).
   */
  list(connectorId: string, signal: AbortSignal): Promise<CloudInstance[]>;
  /**
   * Launches one instance and waits until it runs with a public address (at most the client's
   * create timeout). A launch retried with the same name returns the same instance where the
   * cloud allows it (AWS's client token). Throws CloudCallError.
   */
  create(launch: CloudLaunch, signal: AbortSignal): Promise<CloudInstance & { address: string }>;
  /**
   * Terminates the instance with this id (the row form). Idempotent: an instance already gone,
   * or stopping under another delete, counts as terminated. Returns once the cloud reports it
   * stopping (GCP and Azure wait for their delete operations). Throws CloudCallError.
   */
  terminate(id: string, signal: AbortSignal): Promise<void>;
  /**
   * Cheap authenticated reads proving the credential works where the connector places its
   * instances, and that the cloud knows what it would launch: the region, zone or resource
   * group, the instance type, machine type or VM size, the image. Throws CloudCallError (`auth`
   * when the credential was refused, `refused` with `field` naming the connector config key the
   * cloud refused).
   */
  verify(signal: AbortSignal): Promise<void>;
}

/** What every client is built with besides its credential and its connector's config. */
export interface CloudClientOptions {
  /** The API's base URL (tests, compatible regions); undefined: the cloud's own. */
  endpoint: string | undefined;
  /** How long a create waits for its instance to run with an address. */
  createTimeoutMs: number;
  /** How often a create or a delete asks how its instance or operation stands. */
  pollIntervalMs: number;
  /** Each call's own deadline. */
  callTimeoutMs: number;
  /** PEM of the CAs to trust instead of the system's (OCTOPROX_EGRESS_CA_FILE), if any. */
  ca: string | undefined;
}
