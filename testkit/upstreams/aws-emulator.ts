/**
 * An EC2 endpoint for the tests of the AWS cloud client (control/cloud/aws.ts), speaking EC2's
 * Query API as the real SDK sends it: `POST /` with a form body (`Action=…&Version=2016-11-15`),
 * XML answers in the EC2 namespace, and EC2's error XML
 * (`<Response><Errors><Error><Code>…</Code><Message>…</Message></Error></Errors>…`).
 *
 * Every request is signed (SigV4), and the signature is checked as AWS does: an access key it
 * does not hold is `AuthFailure` (401), a signature the key's secret does not make is
 * `SignatureDoesNotMatch` (403), a request more than 15 minutes off the clock `RequestExpired`.
 * A region outside `regions` in the signature's scope is `AuthorizationHeaderMalformed` (400,
 * "the region '…' is wrong"), as S3 names a region mismatch: a real unknown region has no
 * endpoint at all, and the client names the `region` field for either. An opt-in region
 * (af-south-1, ap-east-1) the account has not opted in to (`optedIn`) is `AuthFailure` (401), as
 * EC2 answers a request signed for a region the account has not enabled.
 *
 * Actions: RunInstances (ClientToken idempotency, tags, user data), DescribeInstances (by id,
 * or by the filters `tag:<key>`, `tag-key`, `instance-state-name`, `instance-id`,
 * `client-token`, `image-id`, `instance-type`, with `*` and `?`), TerminateInstances,
 * DescribeImages, DescribeInstanceTypes and DescribeRegions (`RegionName.N`, `AllRegions`).
 * Instances live in the region that launched them.
 *
 * THE INSTANCE BOOT IS A STAND-IN: an instance starts `pending`; after `bootDelayMs` the
 * emulator runs `bootInstance` (cloud-boot.ts), which starts Debian's tinyproxy on the
 * instance's own 127.x.y.z address with the login its user data (the start-up script) sets,
 * and the instance turns `running` with that address as its public IP. Terminating it stops
 * that proxy. No Squid is installed and no script is run.
 *
 * Switches a test flips at run time: `refuseCreates` (RunInstances answers an error, nothing
 * launched), `slowCreates` (new instances stay pending until switched off), `failListings`
 * (DescribeInstances answers 503 Unavailable), `loseAnswers` (the next RunInstances launch but
 * answer 500, as an answer lost on the way).
 */
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import { testCertificate } from "../certs.ts";
import { freePort } from "../ports.ts";
import { type BootedInstance, bootInstance, InstanceAddresses } from "./cloud-boot.ts";

export interface AwsKey {
  accessKey: string;
  secretKey: string;
}

export interface AwsEmulatorOptions {
  /** The access keys it knows, each with its secret. */
  keys: readonly AwsKey[];
  /** Regions it answers for; a set of AWS's own unless told. */
  regions?: readonly string[];
  /** The opt-in regions (AWS_OPT_IN_REGIONS) the account has enabled; none unless told. */
  optedIn?: readonly string[];
  /** Image ids it knows; `AWS_EMULATOR_IMAGE` unless told. */
  images?: readonly string[];
  /** Instance types it knows; `AWS_EMULATOR_INSTANCE_TYPES` unless told. */
  instanceTypes?: readonly string[];
  /** Security group ids it knows; any id when unset. */
  securityGroups?: readonly string[];
  /** Key pair names it knows; any name when unset. */
  keyPairs?: readonly string[];
  /** Between a launch and the boot (0 unless told). */
  bootDelayMs?: number;
  /** Where instances' public addresses come from; a random /16 of 127/8 unless told. */
  addresses?: InstanceAddresses;
  /** Serve HTTPS with the test certificate (trust `ca`). */
  tls?: boolean;
}

export type EmulatedState = "pending" | "running" | "shutting-down" | "terminated";

/** An instance as the emulator holds it. */
export interface EmulatedInstance {
  /** The `Name` tag, or the client token when it has none. */
  name: string;
  /** `i-…`. */
  id: string;
  state: EmulatedState;
  tags: Record<string, string>;
  /** The public address, once running. */
  address: string | null;
  /** The user data, decoded. */
  userData: string;
  createdAt: Date;
  clientToken: string;
  region: string;
  imageId: string;
  instanceType: string;
}

export interface AwsEmulator {
  /** `http(s)://127.0.0.1:<port>`: the client's endpoint. */
  readonly url: string;
  /** The PEM to trust when `tls`. */
  readonly ca: string | undefined;
  /** Requests by Action, refused ones included. */
  readonly calls: Readonly<Record<string, number>>;
  /** Every instance launched, oldest first. */
  instances(): EmulatedInstance[];
  /**
   * RunInstances answers `code` (InsufficientInstanceCapacity unless told) and launches
   * nothing, until called with `false`.
   */
  refuseCreates(code?: string | false): void;
  /** While on, new instances stay pending and do not boot; switched off, they boot. */
  slowCreates(on: boolean): void;
  /** While on, DescribeInstances answers 503 Unavailable. */
  failListings(on: boolean): void;
  /** The next `count` RunInstances launch their instances but answer 500 InternalError. */
  loseAnswers(count: number): void;
  /** Stops the server and every booted proxy (safe twice). */
  close(): Promise<void>;
}

export const AWS_EMULATOR_IMAGE = "ami-0123456789abcdef0";
export const AWS_EMULATOR_INSTANCE_TYPES: readonly string[] = [
  "t2.micro",
  "t3.micro",
  "t3.small",
  "t4g.nano",
];
const AWS_REGIONS: readonly string[] = [
  "us-east-1",
  "us-east-2",
  "us-west-1",
  "us-west-2",
  "ca-central-1",
  "eu-west-1",
  "eu-west-2",
  "eu-west-3",
  "eu-central-1",
  "eu-north-1",
  "ap-south-1",
  "ap-northeast-1",
  "ap-southeast-1",
  "ap-southeast-2",
  "sa-east-1",
  "af-south-1",
  "ap-east-1",
];
/** Regions an account uses only once it opted in to them (AWS's since 2019, two of them). */
export const AWS_OPT_IN_REGIONS: readonly string[] = ["af-south-1", "ap-east-1"];

const NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15/";
const MAX_BODY_BYTES = 1024 * 1024;
/** AWS refuses a signature dated further than this from its clock. */
const MAX_SKEW_MS = 15 * 60_000;
/** EC2's user data limit, before base64. */
const MAX_USER_DATA_BYTES = 16 * 1024;
const STATE_CODES: Readonly<Record<EmulatedState, number>> = {
  pending: 0,
  running: 16,
  "shutting-down": 32,
  terminated: 48,
};
/** The HTTP status AWS answers an error code with; 400 for the rest. */
const ERROR_STATUS: Readonly<Record<string, number>> = {
  AuthFailure: 401,
  MissingAuthenticationToken: 401,
  SignatureDoesNotMatch: 403,
  UnauthorizedOperation: 403,
  InternalError: 500,
  InsufficientInstanceCapacity: 500,
  Unavailable: 503,
  RequestLimitExceeded: 503,
};

/** An error answered in EC2's error XML. */
class Ec2Error extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
    this.status = ERROR_STATUS[code] ?? 400;
  }
}

interface Held {
  id: string;
  reservationId: string;
  region: string;
  clientToken: string;
  imageId: string;
  instanceType: string;
  keyName: string | undefined;
  securityGroupIds: string[];
  tags: Map<string, string>;
  userData: string;
  state: EmulatedState;
  /** Reserved at launch, shown once running. */
  plannedAddress: string;
  address: string | null;
  createdAt: Date;
  booted: BootedInstance | undefined;
  /** Launched while `slowCreates` was on and not booted yet. */
  held: boolean;
}

// ---------------------------------------------------------------------------------------------
// SigV4

/** RFC 3986 encoding, as SigV4 wants it (encodeURIComponent leaves !'()* alone). */
function rfc3986(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

const sha256Hex = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) =>
  createHmac("sha256", key).update(data).digest();

/** The path as SigV4 signs it for every service but S3: normalised, its segments encoded again. */
function canonicalPath(rawPath: string): string {
  const segments: string[] = [];
  for (const segment of rawPath.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") segments.pop();
    else segments.push(segment);
  }
  const trailing = segments.length > 0 && rawPath.endsWith("/") ? "/" : "";
  return `/${segments.map(rfc3986).join("/")}${trailing}`;
}

function canonicalQuery(search: string): string {
  const pairs = [...new URLSearchParams(search)].map((
    [key, value],
  ) => [rfc3986(key), rfc3986(value)]);
  pairs.sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1));
  return pairs.map(([key, value]) => `${key}=${value}`).join("&");
}

interface SignedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/\s]+)\/(\d{8})\/([^/\s]+)\/([^/\s]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;

/** Checks the request's SigV4 signature; answers its region, or throws what AWS would answer. */
function authenticate(
  request: SignedRequest,
  keys: ReadonlyMap<string, string>,
  regions: ReadonlySet<string>,
  disabled: ReadonlySet<string>,
): string {
  const header = request.headers.authorization;
  if (header === undefined) {
    throw new Ec2Error("MissingAuthenticationToken", "The request must contain an access key ID");
  }
  const match = AUTHORIZATION.exec(header);
  if (match === null) {
    throw new Ec2Error("IncompleteSignature", "The Authorization header is not SigV4 as sent");
  }
  const [, accessKey, scopeDate, region, service, signedHeaders, signature] = match;
  if (!regions.has(region)) {
    throw new Ec2Error(
      "AuthorizationHeaderMalformed",
      `The authorization header is malformed; the region '${region}' is wrong`,
    );
  }
  if (service !== "ec2") {
    throw new Ec2Error(
      "SignatureDoesNotMatch",
      "Credential should be scoped to correct service: 'ec2'",
    );
  }
  const amzDate = String(request.headers["x-amz-date"] ?? "");
  const dated = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (dated === null) throw new Ec2Error("IncompleteSignature", "The request has no X-Amz-Date");
  const [, year, month, day, hour, minute, second] = dated;
  const signedAtMs = Date.UTC(+year, +month - 1, +day, +hour, +minute, +second);
  if (Math.abs(Date.now() - signedAtMs) > MAX_SKEW_MS) {
    throw new Ec2Error("RequestExpired", "Request has expired");
  }
  if (amzDate.slice(0, 8) !== scopeDate) {
    throw new Ec2Error(
      "SignatureDoesNotMatch",
      "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP",
    );
  }
  const secret = keys.get(accessKey);
  // A region the account has not opted in to knows none of its keys.
  if (secret === undefined || disabled.has(region)) {
    throw new Ec2Error(
      "AuthFailure",
      "AWS was not able to validate the provided access credentials",
    );
  }
  const names = signedHeaders.split(";");
  const url = new URL(request.url, "http://emulator");
  const canonicalRequest = [
    request.method,
    canonicalPath(url.pathname),
    canonicalQuery(url.search),
    ...names.map((name) => `${name}:${headerValue(request.headers[name])}`),
    "",
    signedHeaders,
    sha256Hex(request.body),
  ].join("\n");
  const scope = `${scopeDate}/${region}/${service}/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonicalRequest)].join("\n");
  let key = hmac(`AWS4${secret}`, scopeDate);
  for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
  const expected = hmac(key, stringToSign);
  if (!timingSafeEqual(expected, Buffer.from(signature, "hex"))) {
    throw new Ec2Error(
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. " +
        "Check your AWS Secret Access Key and signing method.",
    );
  }
  return region;
}

function headerValue(value: string | string[] | undefined): string {
  const text = Array.isArray(value) ? value.join(",") : value ?? "";
  return text.trim().replace(/\s+/g, " ");
}

// ---------------------------------------------------------------------------------------------
// The Query API's parameters

/** The values of `<prefix>.1`, `<prefix>.2`, … in order. */
function list(params: URLSearchParams, prefix: string): string[] {
  return indexes(params, prefix).flatMap((n) => params.getAll(`${prefix}.${n}`));
}

/** The member numbers under `prefix` (`Filter` of `Filter.2.Name`), in order. */
function indexes(params: URLSearchParams, prefix: string): number[] {
  const found = new Set<number>();
  const pattern = new RegExp(`^${prefix.replaceAll(".", "\\.")}\\.(\\d+)(\\.|$)`);
  for (const key of params.keys()) {
    const match = pattern.exec(key);
    if (match) found.add(Number(match[1]));
  }
  return [...found].sort((a, b) => a - b);
}

function required(params: URLSearchParams, name: string): string {
  const value = params.get(name);
  if (value === null || value === "") {
    throw new Ec2Error("MissingParameter", `The request must contain the parameter ${name}`);
  }
  return value;
}

interface Filter {
  name: string;
  values: RegExp[];
}

/** `*` and `?` as EC2's filters read them. */
function glob(value: string): RegExp {
  const escaped = value.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`^${escaped.replaceAll("*", ".*").replaceAll("?", ".")}$`, "s");
}

const FILTERS: Readonly<Record<string, (instance: Held) => readonly string[]>> = {
  "tag-key": (instance) => [...instance.tags.keys()],
  "instance-state-name": (instance) => [instance.state],
  "instance-id": (instance) => [instance.id],
  "client-token": (instance) => [instance.clientToken],
  "image-id": (instance) => [instance.imageId],
  "instance-type": (instance) => [instance.instanceType],
};

function filters(params: URLSearchParams): Filter[] {
  return indexes(params, "Filter").map((n) => {
    const name = required(params, `Filter.${n}.Name`);
    if (!name.startsWith("tag:") && !Object.hasOwn(FILTERS, name)) {
      throw new Ec2Error("InvalidParameterValue", `The filter '${name}' is invalid`);
    }
    return { name, values: list(params, `Filter.${n}.Value`).map(glob) };
  });
}

function filterValues(name: string, instance: Held): readonly string[] {
  if (name.startsWith("tag:")) {
    const value = instance.tags.get(name.slice(4));
    return value === undefined ? [] : [value];
  }
  return FILTERS[name](instance);
}

function matches(instance: Held, filter: Filter): boolean {
  return filterValues(filter.name, instance).some((value) =>
    filter.values.some((pattern) => pattern.test(value))
  );
}

// ---------------------------------------------------------------------------------------------
// XML

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** `<name>content</name>`; content is XML already (use `text` for values). */
const el = (name: string, content: string) => `<${name}>${content}</${name}>`;
const text = (name: string, value: string | number | boolean) => el(name, escapeXml(String(value)));
const items = <T>(name: string, values: readonly T[], render: (value: T) => string) =>
  el(name, values.map((value) => el("item", render(value))).join(""));

function answer(action: string, body: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="${NAMESPACE}">${
    text("requestId", randomUUID())
  }${body}</${action}Response>`;
}

function errorXml(error: Ec2Error): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response>${
    el("Errors", el("Error", text("Code", error.code) + text("Message", error.message)))
  }${text("RequestID", randomUUID())}</Response>`;
}

function stateXml(name: string, state: EmulatedState): string {
  return el(name, text("code", STATE_CODES[state]) + text("name", state));
}

function instanceXml(instance: Held, index: number): string {
  return [
    text("instanceId", instance.id),
    text("imageId", instance.imageId),
    stateXml("instanceState", instance.state),
    text("privateDnsName", ""),
    text("dnsName", ""),
    instance.keyName === undefined ? "" : text("keyName", instance.keyName),
    text("amiLaunchIndex", index),
    text("instanceType", instance.instanceType),
    text("launchTime", instance.createdAt.toISOString()),
    el(
      "placement",
      text("availabilityZone", `${instance.region}a`) + text("tenancy", "default"),
    ),
    el("monitoring", text("state", "disabled")),
    instance.address === null ? "" : text("ipAddress", instance.address),
    items("groupSet", instance.securityGroupIds, (id) => text("groupId", id)),
    text("architecture", "x86_64"),
    text("rootDeviceType", "ebs"),
    text("virtualizationType", "hvm"),
    text("clientToken", instance.clientToken),
    items("tagSet", [...instance.tags], ([key, value]) => text("key", key) + text("value", value)),
  ].join("");
}

function reservationXml(reservationId: string, instances: readonly Held[]): string {
  return text("reservationId", reservationId) + text("ownerId", "123456789012") +
    el("groupSet", "") +
    items(
      "instancesSet",
      instances,
      (instance) => instanceXml(instance, instances.indexOf(instance)),
    );
}

// ---------------------------------------------------------------------------------------------
// The emulator

const hex = (bytes: number) => randomBytes(bytes).toString("hex");
const newInstanceId = () => `i-${hex(9).slice(0, 17)}`;
const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;
const IMAGE_ID = /^ami-[0-9a-f]{8,17}$/;

export async function startAwsEmulator(options: AwsEmulatorOptions): Promise<AwsEmulator> {
  const keys = new Map(options.keys.map((key) => [key.accessKey, key.secretKey]));
  const regions = new Set(options.regions ?? AWS_REGIONS);
  const optedIn = new Set(options.optedIn ?? []);
  const disabled = new Set(AWS_OPT_IN_REGIONS.filter((region) => !optedIn.has(region)));
  const images = new Set(options.images ?? [AWS_EMULATOR_IMAGE]);
  const instanceTypes = new Set(options.instanceTypes ?? AWS_EMULATOR_INSTANCE_TYPES);
  const securityGroups = options.securityGroups && new Set(options.securityGroups);
  const keyPairs = options.keyPairs && new Set(options.keyPairs);
  const addresses = options.addresses ?? new InstanceAddresses();
  const bootDelayMs = options.bootDelayMs ?? 0;

  const held: Held[] = [];
  /** Client token (per region) to the instances its launch made. */
  const byToken = new Map<string, Held[]>();
  const calls: Record<string, number> = {};
  const timers = new Set<ReturnType<typeof setTimeout>>();
  /** Boots and stops under way: close() waits for them. */
  const boots = new Set<Promise<void>>();
  let refusing: string | undefined;
  let slow = false;
  let listingsFail = false;
  let answersToLose = 0;
  let closed = false;

  /** Boots an instance (the stand-in), then shows it running unless it was terminated meanwhile. */
  const boot = (instance: Held) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      const booting = bootInstance(instance.plannedAddress, instance.userData).then(
        async (booted) => {
          if (instance.state !== "pending" || closed) {
            await booted.proxy.close();
            return;
          }
          instance.booted = booted;
          instance.address = booted.address;
          instance.state = "running";
        },
        () => {
          // A script without a login boots an instance whose proxy never listens, as a real
          // instance whose script failed still runs.
          if (instance.state === "pending") {
            instance.address = instance.plannedAddress;
            instance.state = "running";
          }
        },
      );
      boots.add(booting);
      booting.finally(() => boots.delete(booting));
    }, bootDelayMs);
    timers.add(timer);
  };

  /** Stops the instance's proxy; the instance is terminated once it has stopped. */
  const stop = (instance: Held) => {
    const booted = instance.booted;
    instance.booted = undefined;
    const stopping = Promise.resolve(booted?.proxy.close()).catch(() => {}).then(() => {
      instance.state = "terminated";
    });
    boots.add(stopping);
    stopping.finally(() => boots.delete(stopping));
  };

  const runInstances = (params: URLSearchParams, region: string): string => {
    const clientToken = params.get("ClientToken") ?? "";
    if (clientToken.length > 64) {
      throw new Ec2Error("InvalidParameterValue", "Value for ClientToken is too long (64 at most)");
    }
    const imageId = required(params, "ImageId");
    const instanceType = params.get("InstanceType") ?? "m1.small";
    const tokenKey = `${region}|${clientToken}`;
    const earlier = clientToken === "" ? undefined : byToken.get(tokenKey);
    if (earlier !== undefined) {
      // The same token is the same launch: its reservation, whatever state it is in now.
      if (earlier[0].imageId !== imageId || earlier[0].instanceType !== instanceType) {
        throw new Ec2Error(
          "IdempotentParameterMismatch",
          "The client token was used with other parameters",
        );
      }
      return reservationXml(earlier[0].reservationId, earlier);
    }
    if (refusing !== undefined) {
      throw new Ec2Error(refusing, `Refused by the emulator's refuseCreates (${refusing})`);
    }
    if (!IMAGE_ID.test(imageId)) {
      throw new Ec2Error(
        "InvalidAMIID.Malformed",
        `Invalid id: "${imageId}" (expecting "ami-...")`,
      );
    }
    if (!images.has(imageId)) {
      throw new Ec2Error("InvalidAMIID.NotFound", `The image id '[${imageId}]' does not exist`);
    }
    if (!instanceTypes.has(instanceType)) {
      throw new Ec2Error(
        "InvalidParameterValue",
        `Invalid value '${instanceType}' for InstanceType.`,
      );
    }
    const securityGroupIds = list(params, "SecurityGroupId");
    for (const id of securityGroupIds) {
      if (securityGroups && !securityGroups.has(id)) {
        throw new Ec2Error("InvalidGroup.NotFound", `The security group '${id}' does not exist`);
      }
    }
    const keyName = params.get("KeyName") ?? undefined;
    if (keyName !== undefined && keyPairs && !keyPairs.has(keyName)) {
      throw new Ec2Error("InvalidKeyPair.NotFound", `The key pair '${keyName}' does not exist`);
    }
    const userData = decodeUserData(params.get("UserData"));
    const tags = instanceTags(params);
    const count = Number(params.get("MaxCount") ?? "1");
    const minCount = Number(params.get("MinCount") ?? "1");
    if (!Number.isInteger(count) || count < 1 || count > 20 || minCount > count) {
      throw new Ec2Error("InvalidParameterValue", "MinCount and MaxCount must be 1 to 20");
    }
    const reservationId = `r-${hex(9).slice(0, 17)}`;
    const launched: Held[] = [];
    for (let n = 0; n < count; n++) {
      const instance: Held = {
        id: newInstanceId(),
        reservationId,
        region,
        clientToken,
        imageId,
        instanceType,
        keyName,
        securityGroupIds,
        tags: new Map(tags),
        userData,
        state: "pending",
        plannedAddress: addresses.take(),
        address: null,
        createdAt: new Date(),
        booted: undefined,
        held: slow,
      };
      launched.push(instance);
      held.push(instance);
      if (!slow) boot(instance);
    }
    if (clientToken !== "") byToken.set(tokenKey, launched);
    if (answersToLose > 0) {
      answersToLose--;
      throw new Ec2Error("InternalError", "An internal error has occurred");
    }
    return reservationXml(reservationId, launched);
  };

  const describeInstances = (params: URLSearchParams, region: string): string => {
    if (listingsFail) {
      throw new Ec2Error("Unavailable", "The service is unavailable. Please try again shortly.");
    }
    const ids = list(params, "InstanceId");
    for (const id of ids) {
      if (!INSTANCE_ID.test(id)) {
        throw new Ec2Error("InvalidInstanceID.Malformed", `Invalid id: "${id}"`);
      }
    }
    const inRegion = held.filter((instance) => instance.region === region);
    const missing = ids.filter((id) => !inRegion.some((instance) => instance.id === id));
    if (missing.length > 0) {
      throw new Ec2Error(
        "InvalidInstanceID.NotFound",
        `The instance IDs '${missing.join(", ")}' do not exist`,
      );
    }
    const wanted = filters(params);
    // A describe by id shows a terminated instance; a listing no longer does.
    const shown = inRegion.filter((instance) =>
      (ids.length > 0 ? ids.includes(instance.id) : instance.state !== "terminated") &&
      wanted.every((filter) => matches(instance, filter))
    );
    const reservations = new Map<string, Held[]>();
    for (const instance of shown) {
      reservations.set(instance.reservationId, [
        ...(reservations.get(instance.reservationId) ?? []),
        instance,
      ]);
    }
    return items(
      "reservationSet",
      [...reservations],
      ([reservationId, instances]) => reservationXml(reservationId, instances),
    );
  };

  const terminateInstances = (params: URLSearchParams, region: string): string => {
    const ids = list(params, "InstanceId");
    if (ids.length === 0) {
      throw new Ec2Error("MissingParameter", "The request must contain InstanceId");
    }
    const found = ids.map((id) => {
      if (!INSTANCE_ID.test(id)) {
        throw new Ec2Error("InvalidInstanceID.Malformed", `Invalid id: "${id}"`);
      }
      const instance = held.find((each) => each.id === id && each.region === region);
      if (instance === undefined) {
        throw new Ec2Error("InvalidInstanceID.NotFound", `The instance ID '${id}' does not exist`);
      }
      return instance;
    });
    const changes = found.map((instance) => {
      const previous = instance.state;
      if (previous === "pending" || previous === "running") {
        instance.state = "shutting-down";
        instance.address = null;
        stop(instance);
      }
      return { instance, previous };
    });
    return items(
      "instancesSet",
      changes,
      ({ instance, previous }) =>
        text("instanceId", instance.id) + stateXml("currentState", instance.state) +
        stateXml("previousState", previous),
    );
  };

  const describeImages = (params: URLSearchParams): string => {
    const ids = list(params, "ImageId");
    for (const id of ids) {
      if (!IMAGE_ID.test(id)) throw new Ec2Error("InvalidAMIID.Malformed", `Invalid id: "${id}"`);
    }
    const missing = ids.filter((id) => !images.has(id));
    if (missing.length > 0) {
      throw new Ec2Error(
        "InvalidAMIID.NotFound",
        `The image id '[${missing.join(", ")}]' does not exist`,
      );
    }
    return items(
      "imagesSet",
      ids.length > 0 ? ids : [...images],
      (id) =>
        text("imageId", id) + text("imageLocation", `emulator/${id}`) +
        text("imageState", "available") + text("imageOwnerId", "123456789012") +
        text("isPublic", true) + text("architecture", "x86_64") + text("imageType", "machine") +
        text("name", `debian-12-${id}`) + text("rootDeviceType", "ebs") +
        text("virtualizationType", "hvm") + text("hypervisor", "xen"),
    );
  };

  const describeInstanceTypes = (params: URLSearchParams): string => {
    const wanted = list(params, "InstanceType");
    const missing = wanted.filter((type) => !instanceTypes.has(type));
    if (missing.length > 0) {
      throw new Ec2Error(
        "InvalidInstanceType",
        `The following supplied instance types do not exist: [${missing.join(", ")}]`,
      );
    }
    return items(
      "instanceTypeSet",
      wanted.length > 0 ? wanted : [...instanceTypes],
      (type) =>
        text("instanceType", type) + text("currentGeneration", true) +
        el("vCpuInfo", text("defaultVCpus", 2)) + el("memoryInfo", text("sizeInMiB", 1024)),
    );
  };

  const describeRegions = (params: URLSearchParams): string => {
    const named = list(params, "RegionName");
    const unknown = named.filter((region) => !regions.has(region));
    if (unknown.length > 0) {
      throw new Ec2Error("InvalidParameterValue", `Invalid region names: [${unknown.join(", ")}]`);
    }
    const all = params.get("AllRegions") === "true" || named.length > 0;
    const shown = [...regions].filter((region) =>
      (named.length === 0 || named.includes(region)) && (all || !disabled.has(region))
    );
    return items(
      "regionInfo",
      shown,
      (region) =>
        text("regionName", region) + text("regionEndpoint", `ec2.${region}.amazonaws.com`) +
        text(
          "optInStatus",
          !AWS_OPT_IN_REGIONS.includes(region)
            ? "opt-in-not-required"
            : disabled.has(region)
            ? "not-opted-in"
            : "opted-in",
        ),
    );
  };

  const actions: Readonly<Record<string, (params: URLSearchParams, region: string) => string>> = {
    RunInstances: runInstances,
    DescribeInstances: describeInstances,
    TerminateInstances: terminateInstances,
    DescribeImages: describeImages,
    DescribeInstanceTypes: describeInstanceTypes,
    DescribeRegions: describeRegions,
  };

  const handle = async (request: http.IncomingMessage, response: http.ServerResponse) => {
    const send = (status: number, body: string) => {
      response.writeHead(status, {
        "content-type": "text/xml;charset=UTF-8",
        "content-length": Buffer.byteLength(body),
      });
      response.end(body);
    };
    try {
      const body = await readBody(request);
      const url = new URL(request.url ?? "/", "http://emulator");
      const params = new URLSearchParams(url.search);
      for (const [key, value] of new URLSearchParams(body.toString("utf8"))) {
        params.append(key, value);
      }
      const action = params.get("Action") ?? "";
      calls[action] = (calls[action] ?? 0) + 1;
      const region = authenticate(
        {
          method: request.method ?? "GET",
          url: request.url ?? "/",
          headers: request.headers,
          body,
        },
        keys,
        regions,
        disabled,
      );
      const run = Object.hasOwn(actions, action) ? actions[action] : undefined;
      if (run === undefined) {
        throw new Ec2Error(
          "InvalidAction",
          `The action ${action} is not valid for this web service.`,
        );
      }
      send(200, answer(action, run(params, region)));
    } catch (error) {
      const failure = error instanceof Ec2Error ? error : new Ec2Error(
        "InternalError",
        `An internal error has occurred: ${(error as Error).message}`,
      );
      send(failure.status, errorXml(failure));
    }
  };

  const certificate = options.tls ? await testCertificate() : undefined;
  const listener = (request: http.IncomingMessage, response: http.ServerResponse) => {
    void handle(request, response);
  };
  const server = certificate
    ? https.createServer({ cert: certificate.cert, key: certificate.key }, listener)
    : http.createServer(listener);
  const sockets = new Set<net.Socket>();
  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  const port = await listen(server);

  let closing: Promise<void> | undefined;
  return {
    url: `${certificate ? "https" : "http"}://127.0.0.1:${port}`,
    ca: certificate?.ca,
    calls,
    instances: () =>
      held.map((instance) => ({
        name: instance.tags.get("Name") ?? instance.clientToken,
        id: instance.id,
        state: instance.state,
        tags: Object.fromEntries(instance.tags),
        address: instance.address,
        userData: instance.userData,
        createdAt: instance.createdAt,
        clientToken: instance.clientToken,
        region: instance.region,
        imageId: instance.imageId,
        instanceType: instance.instanceType,
      })),
    refuseCreates(code: string | false = "InsufficientInstanceCapacity") {
      refusing = code === false ? undefined : code;
    },
    slowCreates(on: boolean) {
      slow = on;
      if (on) return;
      for (const instance of held) {
        if (!instance.held) continue;
        instance.held = false;
        if (instance.state === "pending") boot(instance);
      }
    },
    failListings(on: boolean) {
      listingsFail = on;
    },
    loseAnswers(count: number) {
      answersToLose = count;
    },
    close() {
      closing ??= (async () => {
        closed = true;
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const socket of sockets) socket.destroy();
        await Promise.allSettled([...boots]);
        await Promise.allSettled(held.map((instance) => instance.booted?.proxy.close()));
        await stopped;
      })();
      return closing;
    },
  };
}

/** The tags of the request's `instance` tag specifications, in order. */
function instanceTags(params: URLSearchParams): Map<string, string> {
  const tags = new Map<string, string>();
  for (const n of indexes(params, "TagSpecification")) {
    const prefix = `TagSpecification.${n}`;
    if (params.get(`${prefix}.ResourceType`) !== "instance") continue;
    for (const m of indexes(params, `${prefix}.Tag`)) {
      const key = required(params, `${prefix}.Tag.${m}.Key`);
      if (tags.has(key)) {
        throw new Ec2Error("InvalidParameterValue", `Duplicate tag key '${key}' in the request`);
      }
      if (key.toLowerCase().startsWith("aws:")) {
        throw new Ec2Error("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved");
      }
      tags.set(key, params.get(`${prefix}.Tag.${m}.Value`) ?? "");
    }
  }
  return tags;
}

function decodeUserData(encoded: string | null): string {
  if (encoded === null) return "";
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded) || encoded.length % 4 !== 0) {
    throw new Ec2Error("InvalidParameterValue", "Invalid BASE64 encoding of user data");
  }
  const bytes = Buffer.from(encoded, "base64");
  if (bytes.length > MAX_USER_DATA_BYTES) {
    throw new Ec2Error("InvalidParameterValue", "User data is limited to 16384 bytes");
  }
  return bytes.toString("utf8");
}

function readBody(request: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Ec2Error("InvalidParameterValue", "The request is too large"));
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.once("end", () => resolve(Buffer.concat(chunks)));
    request.once("error", reject);
  });
}

/** Listens on a free port of 127.0.0.1 (freePort: below the ephemeral range), trying a few. */
async function listen(server: http.Server): Promise<number> {
  for (let attempt = 1;; attempt++) {
    const port = await freePort();
    const bound = await new Promise<boolean>((resolve, reject) => {
      const failed = (error: NodeJS.ErrnoException) => {
        if (error.code === "EADDRINUSE" && attempt < 5) resolve(false);
        else reject(error);
      };
      server.once("error", failed);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", failed);
        resolve(true);
      });
    });
    if (bound) return port;
  }
}
