/**
 * AWS: the CloudClient over EC2's API with the real SDK (@aws-sdk/client-ec2). An instance is
 * launched with its creation name as the client token, so a launch retried after a lost answer
 * (by the SDK or by the scale job) returns the instance the first one made, and tagged with its
 * name, the connector's tags and CONNECTOR_TAG, which the one listing call filters on.
 *
 * Every SDK failure leaves as a CloudCallError: the message holds EC2's code and text, never the
 * secret key or the user data (the start-up script carries the proxy's login). A caller's own
 * abort rejects with its signal's reason, as withDeadline does.
 */
import https from "node:https";
import type * as Ec2Sdk from "@aws-sdk/client-ec2";
import type { _InstanceType as InstanceType, EC2Client, Instance, Tag } from "@aws-sdk/client-ec2";
import { withDeadline } from "../../shared/async/deadline.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { CloudCallError, type CloudFailure, DeadlineError } from "../../shared/errors.ts";
import type { AwsConnector, AwsCredential } from "../model/cloud.ts";
import {
  type CloudClient,
  type CloudClientOptions,
  type CloudInstance,
  type CloudLaunch,
  CONNECTOR_TAG,
} from "./contract.ts";
import { cloudIdOf, rowInstanceId } from "./naming.ts";

/** One try and two retries: the SDK retries 5xx, throttling and dropped connections itself. */
const MAX_ATTEMPTS = 3;
/** An error message is shown at a field: EC2's own (UnauthorizedOperation's) can run long. */
const MAX_MESSAGE_CHARS = 400;

/** Credential refusals, with the credential field each points at. */
const AUTH_CODES: Readonly<Record<string, string | undefined>> = {
  AuthFailure: "access_key",
  InvalidClientTokenId: "access_key",
  MissingAuthenticationToken: "access_key",
  SignatureDoesNotMatch: "secret_key",
  IncompleteSignature: undefined,
  UnauthorizedOperation: undefined,
  OptInRequired: undefined,
  Blocked: undefined,
};

const THROTTLING_CODES: ReadonlySet<string> = new Set([
  "RequestLimitExceeded",
  "Throttling",
  "ThrottlingException",
  "RequestThrottled",
  "EC2ThrottledException",
]);

/** Refusals by code (prefix for the dotted families), with the connector field each names. */
const REFUSED_FIELDS: readonly (readonly [string, string])[] = [
  ["InvalidAMIID.", "ami_id"],
  ["InvalidInstanceType", "instance_type"],
  ["InvalidGroup.", "security_group"],
  ["InvalidGroupId.", "security_group"],
  ["InvalidKeyPair.", "key_pair_name"],
  // The emulator's answer to a region it does not serve (S3's name for a region mismatch).
  ["AuthorizationHeaderMalformed", "region"],
  ["InvalidRegion", "region"],
];

/** Capacity and quota refusals EC2 answers with a 5xx: retrying now does not help. */
const CAPACITY_CODES: ReadonlySet<string> = new Set([
  "InsufficientInstanceCapacity",
  "InsufficientHostCapacity",
  "InsufficientReservedInstanceCapacity",
  "InsufficientCapacity",
]);

/** Where EC2's text of a parameter error names the parameter, the field that holds it. */
const PARAMETER_FIELDS: readonly (readonly [RegExp, string])[] = [
  [/InstanceType|instance type/i, "instance_type"],
  [/ImageId|\bAMI\b|image id/i, "ami_id"],
  [/SecurityGroup|security group/i, "security_group"],
  [/KeyName|key pair/i, "key_pair_name"],
];

const STOPPED_STATES: ReadonlySet<string> = new Set(["shutting-down", "terminated"]);
/** Codes for an instance that is not there (any more): a termination is done. */
const GONE_CODES: ReadonlySet<string> = new Set([
  "InvalidInstanceID.NotFound",
  "InvalidInstanceID.Malformed",
]);

/** What a call's failure is read against. */
interface CallContext {
  /** The connector field any refusal of this call names (DescribeImages: `ami_id`). */
  refusedField?: string;
  /** Texts no message may hold (the user data, raw and encoded). */
  secrets?: readonly string[];
}

/**
 * The connector fields the client reads. AwsConnector, as valibot infers it through the model's
 * cross-field checks (`ranges`), keeps only the fields every cloud shares: these are named here.
 */
interface AwsPlacement {
  region: string;
  instance_type: string;
  ami_id: string;
  security_group: string | null;
  key_pair_name: string | null;
}

/** One SDK call under the call deadline, its failure mapped to a CloudCallError. */
type Call = <T>(
  operation: string,
  send: (abortSignal: AbortSignal) => Promise<T>,
  signal: AbortSignal,
  context?: CallContext,
  timeoutMs?: number,
) => Promise<T>;

/** The SDK once a call loaded it, which any of its errors implies. */
let loadedSdk: typeof Ec2Sdk | undefined;

/**
 * The SDK, loaded at the first call rather than with the module: loading it costs about a second
 * of CPU, which every CLI command and control process would otherwise pay for a cloud it may
 * never call.
 */
async function ec2Sdk(): Promise<typeof Ec2Sdk> {
  loadedSdk ??= await import("@aws-sdk/client-ec2");
  return loadedSdk;
}

/** The EC2 client of `credential` in `region`, at the endpoint and with the CA when given. */
function ec2Client(
  sdk: typeof Ec2Sdk,
  credential: AwsCredential,
  region: string,
  options: CloudClientOptions,
): EC2Client {
  return new sdk.EC2Client({
    region,
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    credentials: { accessKeyId: credential.access_key, secretAccessKey: credential.secret_key },
    maxAttempts: MAX_ATTEMPTS,
    requestHandler: {
      connectionTimeout: options.callTimeoutMs,
      requestTimeout: options.callTimeoutMs,
      // A CA given replaces the system's (OCTOPROX_EGRESS_CA_FILE: a TLS-inspecting egress).
      httpsAgent: new https.Agent({
        keepAlive: true,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
      }),
    },
  });
}

/** The calls of a client of `credential`: no message holds its secret key. */
function caller(credential: AwsCredential, options: CloudClientOptions): Call {
  const secretKey = credential.secret_key;
  return async function call<T>(
    operation: string,
    send: (abortSignal: AbortSignal) => Promise<T>,
    signal: AbortSignal,
    context: CallContext = {},
    timeoutMs = options.callTimeoutMs,
  ): Promise<T> {
    try {
      return await withDeadline(`aws ${operation}`, timeoutMs, send, { signal });
    } catch (error) {
      if (signal.aborted && error === signal.reason) throw error;
      const redact = (text: string) => redacted(text, [secretKey, ...(context.secrets ?? [])]);
      throw cloudError(operation, error, {
        customEndpoint: options.endpoint !== undefined,
        refusedField: context.refusedField,
        redact,
      });
    }
  };
}

/** The region a credential's own check signs for: EC2's first, open to every account. */
const CREDENTIAL_CHECK_REGION = "us-east-1";

/**
 * A credential checked on its own, with no connector: one DescribeRegions in us-east-1 (at the
 * endpoint when one is set), whose signature check proves the access key (AuthFailure,
 * InvalidClientTokenId: `access_key`) and its secret (SignatureDoesNotMatch: `secret_key`). An
 * UnauthorizedOperation proves them too: EC2 judges what a key may do only once its signature
 * passed, and what a connector does is that connector's check. Throws CloudCallError.
 */
export async function verifyAwsCredential(
  credential: AwsCredential,
  options: CloudClientOptions,
  signal: AbortSignal,
): Promise<void> {
  const sdk = await ec2Sdk();
  const ec2 = ec2Client(sdk, credential, CREDENTIAL_CHECK_REGION, options);
  const call = caller(credential, options);
  try {
    await call(
      "DescribeRegions",
      (abortSignal) => ec2.send(new sdk.DescribeRegionsCommand({}), { abortSignal }),
      signal,
    );
  } catch (error) {
    if (error instanceof CloudCallError && error.cloudCode === "UnauthorizedOperation") return;
    throw error;
  } finally {
    ec2.destroy();
  }
}

export function awsClient(
  credential: AwsCredential,
  config: AwsConnector,
  options: CloudClientOptions,
): CloudClient {
  const connector = config as AwsConnector & AwsPlacement;
  const call = caller(credential, options);
  let client: EC2Client | undefined;
  /** The SDK and this connector's client, made at the first call. */
  async function connected(): Promise<{ sdk: typeof Ec2Sdk; ec2: EC2Client }> {
    const sdk = await ec2Sdk();
    client ??= ec2Client(sdk, credential, connector.region, options);
    return { sdk, ec2: client };
  }

  /** The instance by id, or undefined while EC2 does not know it (yet, or any more). */
  async function describeOne(
    instanceId: string,
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<Instance | undefined> {
    const { sdk, ec2 } = await connected();
    try {
      const answer = await call(
        "DescribeInstances",
        (abortSignal) =>
          ec2.send(new sdk.DescribeInstancesCommand({ InstanceIds: [instanceId] }), {
            abortSignal,
          }),
        signal,
        {},
        timeoutMs,
      );
      return answer.Reservations?.flatMap((reservation) => reservation.Instances ?? []).find(
        (instance) => instance.InstanceId === instanceId,
      );
    } catch (error) {
      // Right after a launch EC2 may not list the instance yet (eventual consistency).
      if (error instanceof CloudCallError && GONE_CODES.has(error.cloudCode ?? "")) {
        return undefined;
      }
      throw error;
    }
  }

  async function list(connectorId: string, signal: AbortSignal): Promise<CloudInstance[]> {
    const { sdk, ec2 } = await connected();
    const found: CloudInstance[] = [];
    const seenTokens = new Set<string>();
    let nextToken: string | undefined;
    do {
      const page = await call(
        "DescribeInstances",
        (abortSignal) =>
          ec2.send(
            new sdk.DescribeInstancesCommand({
              Filters: [
                { Name: `tag:${CONNECTOR_TAG}`, Values: [connectorId] },
                { Name: "instance-state-name", Values: ["pending", "running"] },
              ],
              ...(nextToken === undefined ? {} : { NextToken: nextToken }),
            }),
            { abortSignal },
          ),
        signal,
      );
      for (const reservation of page.Reservations ?? []) {
        for (const instance of reservation.Instances ?? []) {
          const listed = listedInstance(instance);
          if (listed !== undefined) found.push(listed);
        }
      }
      // A token answered twice would page for ever.
      nextToken = page.NextToken && !seenTokens.has(page.NextToken) ? page.NextToken : undefined;
      if (nextToken !== undefined) seenTokens.add(nextToken);
    } while (nextToken !== undefined);
    return found;
  }

  async function create(
    launch: CloudLaunch,
    signal: AbortSignal,
  ): Promise<CloudInstance & { address: string }> {
    const { sdk, ec2 } = await connected();
    const startedMs = Date.now();
    const userData = Buffer.from(launch.startupScript, "utf8").toString("base64");
    const context = { secrets: [launch.startupScript, userData] };
    const run = await call(
      "RunInstances",
      (abortSignal) =>
        ec2.send(
          new sdk.RunInstancesCommand({
            MinCount: 1,
            MaxCount: 1,
            // The creation name: a launch retried with it returns the first one's instance.
            ClientToken: launch.name,
            ImageId: connector.ami_id,
            InstanceType: connector.instance_type as InstanceType,
            ...(connector.security_group === null
              ? {}
              : { SecurityGroupIds: [connector.security_group] }),
            ...(connector.key_pair_name === null ? {} : { KeyName: connector.key_pair_name }),
            UserData: userData,
            TagSpecifications: [{ ResourceType: "instance", Tags: launchTags(launch) }],
          }),
          { abortSignal },
        ),
      signal,
      context,
    );
    const launched = run.Instances?.[0];
    const instanceId = launched?.InstanceId;
    if (launched === undefined || instanceId === undefined) {
      throw new CloudCallError(
        "aws",
        "RunInstances",
        "unavailable",
        "the answer named no instance",
      );
    }
    const deadlineMs = startedMs + options.createTimeoutMs;
    const timedOut = (cause?: unknown) =>
      new CloudCallError(
        "aws",
        "RunInstances",
        "timeout",
        `instance ${instanceId} did not run with a public address within ${options.createTimeoutMs} ms`,
        { cause },
      );
    let instance: Instance = launched;
    for (;;) {
      const state = instance.State?.Name;
      if (state === "running" && instance.PublicIpAddress) {
        return {
          name: launch.name,
          id: rowInstanceId("aws", instanceId),
          state: "running",
          address: instance.PublicIpAddress,
        };
      }
      if (state !== undefined && state !== "pending" && state !== "running") {
        const reason = instance.StateReason?.Message ?? instance.StateReason?.Code ??
          "no reason given";
        throw new CloudCallError(
          "aws",
          "RunInstances",
          "lost",
          `instance ${instanceId} went ${state} before it ran: ${reason}`,
          { cloudCode: instance.StateReason?.Code },
        );
      }
      if (deadlineMs - Date.now() <= options.pollIntervalMs) throw timedOut();
      await sleep(options.pollIntervalMs, signal);
      // The last poll gets what is left of the create's time, not a whole call's.
      const pollMs = Math.max(1, Math.min(options.callTimeoutMs, deadlineMs - Date.now()));
      try {
        instance = (await describeOne(instanceId, signal, pollMs)) ?? instance;
      } catch (error) {
        const cut = pollMs < options.callTimeoutMs;
        if (cut && error instanceof CloudCallError && error.failure === "timeout") {
          throw timedOut(error);
        }
        throw error;
      }
    }
  }

  async function terminate(id: string, signal: AbortSignal): Promise<void> {
    const instanceId = cloudIdOf("aws", id);
    if (instanceId === undefined) {
      throw new CloudCallError(
        "aws",
        "TerminateInstances",
        "refused",
        `${id} is no AWS instance id`,
      );
    }
    const { sdk, ec2 } = await connected();
    let state: string | undefined;
    try {
      const answer = await call(
        "TerminateInstances",
        (abortSignal) =>
          ec2.send(new sdk.TerminateInstancesCommand({ InstanceIds: [instanceId] }), {
            abortSignal,
          }),
        signal,
      );
      state = answer.TerminatingInstances?.find((each) => each.InstanceId === instanceId)
        ?.CurrentState?.Name;
    } catch (error) {
      // Already gone (or never an instance): nothing is left to terminate.
      if (error instanceof CloudCallError && GONE_CODES.has(error.cloudCode ?? "")) return;
      throw error;
    }
    // EC2 answers shutting-down at once; anything else, ask until it says so.
    const deadlineMs = Date.now() + options.createTimeoutMs;
    while (state === undefined || !STOPPED_STATES.has(state)) {
      if (deadlineMs - Date.now() <= options.pollIntervalMs) {
        throw new CloudCallError(
          "aws",
          "TerminateInstances",
          "timeout",
          `instance ${instanceId} was not shutting down within ${options.createTimeoutMs} ms`,
        );
      }
      await sleep(options.pollIntervalMs, signal);
      const instance = await describeOne(instanceId, signal, options.callTimeoutMs);
      if (instance === undefined) return;
      state = instance.State?.Name;
    }
  }

  async function verify(signal: AbortSignal): Promise<void> {
    const { sdk, ec2 } = await connected();
    const images = await call(
      "DescribeImages",
      (abortSignal) =>
        ec2.send(new sdk.DescribeImagesCommand({ ImageIds: [connector.ami_id] }), { abortSignal }),
      signal,
      { refusedField: "ami_id" },
    );
    const image = images.Images?.find((each) => each.ImageId === connector.ami_id);
    if (image === undefined || (image.State !== undefined && image.State !== "available")) {
      throw new CloudCallError(
        "aws",
        "DescribeImages",
        "refused",
        image === undefined
          ? `no image ${connector.ami_id} in ${connector.region}`
          : `image ${connector.ami_id} is ${image.State}`,
        { field: "ami_id" },
      );
    }
    const types = await call(
      "DescribeInstanceTypes",
      (abortSignal) =>
        ec2.send(
          new sdk.DescribeInstanceTypesCommand({
            InstanceTypes: [connector.instance_type as InstanceType],
          }),
          { abortSignal },
        ),
      signal,
      { refusedField: "instance_type" },
    );
    if (!types.InstanceTypes?.some((each) => each.InstanceType === connector.instance_type)) {
      throw new CloudCallError(
        "aws",
        "DescribeInstanceTypes",
        "refused",
        `no instance type ${connector.instance_type} in ${connector.region}`,
        { field: "instance_type" },
      );
    }
  }

  return { provider: "aws", list, create, terminate, verify };
}

/**
 * The launch's tags: its name, the connector's own, and CONNECTOR_TAG last so none of the
 * connector's replaces it. A connector's `Name` is left out: listings read the creation name
 * from it.
 */
function launchTags(launch: CloudLaunch): Tag[] {
  const own = Object.entries(launch.tags).filter(([key]) =>
    key !== "Name" && key !== CONNECTOR_TAG
  );
  return [
    { Key: "Name", Value: launch.name },
    ...own.map(([Key, Value]) => ({ Key, Value })),
    { Key: CONNECTOR_TAG, Value: launch.connectorId },
  ];
}

/** A listed instance as the contract shows it; undefined for one that is not pending or running. */
function listedInstance(instance: Instance): CloudInstance | undefined {
  const state = instance.State?.Name;
  if (instance.InstanceId === undefined || (state !== "pending" && state !== "running")) {
    return undefined;
  }
  const name = instance.Tags?.find((tag) => tag.Key === "Name")?.Value ?? instance.ClientToken ??
    instance.InstanceId;
  return {
    name,
    id: rowInstanceId("aws", instance.InstanceId),
    state,
    address: instance.PublicIpAddress ?? null,
  };
}

function redacted(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) {
    if (secret.length > 0) clean = clean.replaceAll(secret, "[redacted]");
  }
  return clean.length > MAX_MESSAGE_CHARS ? `${clean.slice(0, MAX_MESSAGE_CHARS)}…` : clean;
}

interface Mapping {
  customEndpoint: boolean;
  refusedField: string | undefined;
  redact: (text: string) => string;
}

/** The CloudCallError an SDK failure is, by EC2's code first, then the status, then the socket. */
function cloudError(operation: string, error: unknown, mapping: Mapping): CloudCallError {
  if (error instanceof CloudCallError) return error;
  const fail = (
    failure: CloudFailure,
    message: string,
    extra: { status?: number; cloudCode?: string; field?: string } = {},
  ) =>
    new CloudCallError("aws", operation, failure, mapping.redact(message), {
      ...extra,
      cause: error,
    });
  if (error instanceof DeadlineError) {
    return fail("timeout", `no answer within ${error.timeoutMs} ms`);
  }
  if (loadedSdk !== undefined && error instanceof loadedSdk.EC2ServiceException) {
    const code = error.name;
    const status = error.$metadata.httpStatusCode;
    const message = `${code}: ${error.message}`;
    const base = { status, cloudCode: code };
    if (Object.hasOwn(AUTH_CODES, code)) {
      return fail("auth", message, { ...base, field: AUTH_CODES[code] });
    }
    if (THROTTLING_CODES.has(code)) return fail("throttled", message, base);
    const named = REFUSED_FIELDS.find(([prefix]) => code.startsWith(prefix));
    if (named !== undefined) return fail("refused", message, { ...base, field: named[1] });
    if (status !== undefined && status >= 500 && !CAPACITY_CODES.has(code)) {
      return fail("unavailable", message, base);
    }
    const field = mapping.refusedField ??
      PARAMETER_FIELDS.find(([pattern]) => pattern.test(error.message))?.[1];
    return fail("refused", message, { ...base, field });
  }
  const code = (error as { code?: unknown }).code;
  const name = error instanceof Error ? error.name : "";
  const text = error instanceof Error ? error.message : String(error);
  if (name === "TimeoutError" || code === "ETIMEDOUT") return fail("timeout", `no answer: ${text}`);
  // The SDK's endpoint is made from the region: a region AWS does not have has no address.
  if (code === "ENOTFOUND" && !mapping.customEndpoint) {
    return fail("refused", `no EC2 endpoint for the region: ${text}`, { field: "region" });
  }
  return fail("unavailable", `no answer: ${typeof code === "string" ? `${code} ` : ""}${text}`);
}
