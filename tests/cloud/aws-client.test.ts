/**
 * The AWS cloud client (control/cloud/aws.ts) with the real SDK against the EC2 emulator
 * (testkit/upstreams/aws-emulator.ts), over TLS with the emulator's CA: instances whose
 * stand-in boot runs a real tinyproxy with the start-up script's login, one-call listings,
 * idempotent terminations, verification (a connector's, and a credential's on its own), and each
 * failure as the scale job reads it.
 */
import { randomBytes, randomUUID } from "node:crypto";
import http from "node:http";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { awsClient, verifyAwsCredential } from "../../control/cloud/aws.ts";
import {
  type CloudClientOptions,
  type CloudInstance,
  type CloudLaunch,
  CONNECTOR_TAG,
} from "../../control/cloud/contract.ts";
import { instanceName } from "../../control/cloud/naming.ts";
import { type ProxyLogin, startupScript } from "../../control/cloud/startup-script.ts";
import {
  type AwsConnector,
  AwsConnectorConfig,
  type AwsCredential,
} from "../../control/model/cloud.ts";
import { CloudCallError } from "../../shared/errors.ts";
import { basicAuth, type Credentials } from "../../testkit/clients/proxy-client.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import {
  AWS_EMULATOR_IMAGE,
  type AwsEmulator,
  startAwsEmulator,
} from "../../testkit/upstreams/aws-emulator.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";

const credential: AwsCredential = {
  access_key: "AKIAOCTOPROXTEST0001",
  secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYoctoproxKEY",
};

const connectorConfig = (changes: Record<string, unknown> = {}): AwsConnector =>
  v.parse(AwsConnectorConfig, {
    instance_name: "octo-test",
    region: "eu-west-1",
    instance_type: "t3.micro",
    ami_id: AWS_EMULATOR_IMAGE,
    tags: { team: "blue" },
    ...changes,
  });

let emulator: AwsEmulator;
let origin: Origin;
let options: CloudClientOptions;

beforeAll(async () => {
  [emulator, origin] = await Promise.all([
    startAwsEmulator({
      keys: [{ accessKey: credential.access_key, secretKey: credential.secret_key }],
      tls: true,
      bootDelayMs: 50,
    }),
    startOrigin(),
  ]);
  options = {
    endpoint: emulator.url,
    createTimeoutMs: 20_000,
    pollIntervalMs: 25,
    callTimeoutMs: 5_000,
    ca: emulator.ca,
  };
});

afterAll(async () => {
  await Promise.all([emulator?.close(), origin?.close()]);
});

const signal = () => AbortSignal.timeout(30_000);

const client = (
  changes:
    & { credential?: Partial<AwsCredential>; config?: Record<string, unknown> }
    & Partial<
      CloudClientOptions
    > = {},
) => {
  const { credential: credentialChanges, config, ...optionChanges } = changes;
  return awsClient(
    { ...credential, ...credentialChanges },
    connectorConfig(config),
    { ...options, ...optionChanges },
  );
};

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

/** A launch for `connectorId` with a login of its own, as the scale job makes one. */
async function newLaunch(
  connectorId: string,
  tags: Record<string, string> = { team: "blue" },
): Promise<{ launch: CloudLaunch; login: ProxyLogin }> {
  const login = { username: `u${hex(4)}`, password: `p${hex(12)}`, port: await freePort() };
  const launch = {
    name: instanceName("aws", "octo-test", Date.now()),
    connectorId,
    tags,
    startupScript: startupScript(login),
  };
  return { launch, login };
}

/** The rejection of `pending`, which must be a CloudCallError. */
async function failureOf(pending: Promise<unknown>): Promise<CloudCallError> {
  const error = await pending.then(
    () => new Error("expected the call to fail"),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(CloudCallError);
  return error as CloudCallError;
}

/** One GET of `url` through the instance's proxy at address:port. */
function viaInstance(
  address: string,
  port: number,
  login: Credentials | null,
  url: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({
      host: address,
      port,
      path: url,
      headers: {
        host: new URL(url).host,
        ...(login ? { "proxy-authorization": basicAuth(login) } : {}),
      },
      agent: false,
      signal: AbortSignal.timeout(10_000),
    }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (body += chunk));
      response.once("end", () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.once("error", reject);
    request.end();
  });
}

const held = (id: string) => emulator.instances().find((instance) => `aws-${instance.id}` === id);
const byId = (a: CloudInstance, b: CloudInstance) => a.id.localeCompare(b.id);

describe("create", () => {
  it("runs an instance whose proxy takes the start-up script's login, and refuses without it", async () => {
    const connectorId = randomUUID();
    // The connector's tags can never replace the connector tag.
    const { launch, login } = await newLaunch(connectorId, {
      team: "blue",
      [CONNECTOR_TAG]: "another-connector",
    });
    const instance = await client().create(launch, signal());
    expect(instance).toMatchObject({ name: launch.name, state: "running" });
    expect(instance.id).toMatch(/^aws-i-[0-9a-f]{17}$/);

    const through = await viaInstance(instance.address, login.port, login, `${origin.url}/ip`);
    expect(through.status).toBe(200);
    // The proxy leaves from the instance's own address: it is that instance's proxy.
    expect(JSON.parse(through.body)).toEqual({ ip: instance.address });
    const bare = await viaInstance(instance.address, login.port, null, `${origin.url}/ip`);
    expect(bare.status).toBe(407);

    const emulated = held(instance.id)!;
    expect(emulated.tags).toEqual({
      Name: launch.name,
      team: "blue",
      [CONNECTOR_TAG]: connectorId,
    });
    expect(emulated.clientToken).toBe(launch.name);
    for (const [key, value] of Object.entries(emulated.tags)) {
      expect(`${key}=${value}`).not.toContain(login.password);
    }
    // The user data is the one place the login travels.
    expect(emulated.userData).toBe(launch.startupScript);
  });

  it("yields exactly one instance when RunInstances' answer is lost, and again when retried", async () => {
    const { launch } = await newLaunch(randomUUID());
    const runsBefore = emulator.calls.RunInstances ?? 0;
    emulator.loseAnswers(1);
    const first = await client().create(launch, signal());
    // The SDK tried again after the 500, with the same client token.
    expect((emulator.calls.RunInstances ?? 0) - runsBefore).toBe(2);
    const again = await client().create(launch, signal());
    expect(again).toEqual(first);
    expect(emulator.instances().filter((instance) => instance.name === launch.name)).toHaveLength(
      1,
    );
  });

  it("fails as refused when EC2 has no capacity, launching nothing and naming no secret", async () => {
    const { launch, login } = await newLaunch(randomUUID());
    emulator.refuseCreates("InsufficientInstanceCapacity");
    try {
      const error = await failureOf(client().create(launch, signal()));
      expect(error).toMatchObject({
        provider: "aws",
        operation: "RunInstances",
        failure: "refused",
        cloudCode: "InsufficientInstanceCapacity",
      });
      expect(error.message).not.toContain(login.password);
      expect(error.message).not.toContain(credential.secret_key);
    } finally {
      emulator.refuseCreates(false);
    }
    expect(emulator.instances().some((instance) => instance.name === launch.name)).toBe(false);
  });

  it("fails as throttled when EC2 asks to slow down", async () => {
    const { launch } = await newLaunch(randomUUID());
    emulator.refuseCreates("RequestLimitExceeded");
    try {
      const error = await failureOf(client().create(launch, signal()));
      expect(error).toMatchObject({ failure: "throttled", cloudCode: "RequestLimitExceeded" });
    } finally {
      emulator.refuseCreates(false);
    }
  });

  it("fails as timeout when the instance does not run in time, and the instance runs later", async () => {
    const connectorId = randomUUID();
    const { launch } = await newLaunch(connectorId);
    emulator.slowCreates(true);
    try {
      const error = await failureOf(client({ createTimeoutMs: 400 }).create(launch, signal()));
      expect(error).toMatchObject({ operation: "RunInstances", failure: "timeout" });
      expect(await client().list(connectorId, signal())).toEqual([
        {
          name: launch.name,
          id: expect.stringMatching(/^aws-i-/),
          state: "pending",
          address: null,
        },
      ]);
    } finally {
      emulator.slowCreates(false);
    }
    // The scale job finds it by listing once it runs.
    const running = await waitUntil(async () => {
      const [listed] = await client().list(connectorId, signal());
      return listed?.state === "running" ? listed : undefined;
    }, { message: "the slow instance to run" });
    expect(running.address).toMatch(/^127\./);
  });
});

describe("list", () => {
  it("makes one DescribeInstances and shows only the connector's pending and running instances", async () => {
    const mine = randomUUID();
    const other = randomUUID();
    const aws = client();
    const running = await aws.create((await newLaunch(mine)).launch, signal());
    const doomed = await aws.create((await newLaunch(mine)).launch, signal());
    const elsewhere = await aws.create((await newLaunch(other)).launch, signal());
    const { launch: slowLaunch } = await newLaunch(mine);
    emulator.slowCreates(true);
    try {
      await failureOf(client({ createTimeoutMs: 200 }).create(slowLaunch, signal()));
      await aws.terminate(doomed.id, signal());

      const before = emulator.calls.DescribeInstances ?? 0;
      const listed = await aws.list(mine, signal());
      expect((emulator.calls.DescribeInstances ?? 0) - before).toBe(1);
      const pending = held(listed.find((each) => each.name === slowLaunch.name)?.id ?? "");
      const expected: CloudInstance[] = [
        running,
        { name: slowLaunch.name, id: `aws-${pending?.id}`, state: "pending", address: null },
      ];
      expect(listed.sort(byId)).toEqual(expected.sort(byId));
      expect(await aws.list(other, signal())).toEqual([elsewhere]);
      expect(await aws.list(randomUUID(), signal())).toEqual([]);
    } finally {
      emulator.slowCreates(false);
    }
  });

  it("fails as unavailable while EC2 answers 503", async () => {
    emulator.failListings(true);
    try {
      const error = await failureOf(client().list(randomUUID(), signal()));
      expect(error).toMatchObject({
        operation: "DescribeInstances",
        failure: "unavailable",
        status: 503,
        cloudCode: "Unavailable",
      });
    } finally {
      emulator.failListings(false);
    }
  });
});

describe("terminate", () => {
  it("stops the instance and its proxy, and is idempotent for it and for an unknown id", async () => {
    const connectorId = randomUUID();
    const { launch, login } = await newLaunch(connectorId);
    const aws = client();
    const instance = await aws.create(launch, signal());
    await aws.terminate(instance.id, signal());
    expect(["shutting-down", "terminated"]).toContain(held(instance.id)?.state);
    await waitUntil(async () => !(await portAccepts(instance.address, login.port, 500)), {
      message: "the terminated instance's proxy to stop",
    });
    await waitUntil(() => held(instance.id)?.state === "terminated");

    await aws.terminate(instance.id, signal());
    await aws.terminate("aws-i-0123456789abcdef0", signal());
    expect(await aws.list(connectorId, signal())).toEqual([]);
  });
});

describe("verify", () => {
  it("passes for a working credential, an image and a type the region has", async () => {
    await expect(client().verify(signal())).resolves.toBeUndefined();
  });

  it("refuses a wrong secret and an unknown access key as auth, naming the field", async () => {
    const wrongSecret = "not-the-secret-at-all-0123456789";
    const signature = await failureOf(
      client({ credential: { secret_key: wrongSecret } }).verify(signal()),
    );
    expect(signature).toMatchObject({
      failure: "auth",
      field: "secret_key",
      cloudCode: "SignatureDoesNotMatch",
      status: 403,
    });
    expect(signature.message).not.toContain(wrongSecret);
    const unknown = await failureOf(
      client({ credential: { access_key: "AKIAUNKNOWNKEY000001" } }).verify(signal()),
    );
    expect(unknown).toMatchObject({
      failure: "auth",
      field: "access_key",
      cloudCode: "AuthFailure",
      status: 401,
    });
  });

  it("refuses an unknown image, instance type and region at their fields", async () => {
    const image = await failureOf(
      client({ config: { ami_id: "ami-00000000000000000" } }).verify(signal()),
    );
    expect(image).toMatchObject({ failure: "refused", field: "ami_id" });
    const type = await failureOf(client({ config: { instance_type: "t9.huge" } }).verify(signal()));
    expect(type).toMatchObject({ failure: "refused", field: "instance_type" });
    const region = await failureOf(client({ config: { region: "zz-nowhere-1" } }).verify(signal()));
    expect(region).toMatchObject({ failure: "refused", field: "region" });
  });

  it("trusts the CA it is given instead of the system's", async () => {
    const error = await failureOf(client({ ca: undefined }).verify(signal()));
    expect(error).toMatchObject({ operation: "DescribeImages", failure: "unavailable" });
  });
});

describe("verifyAwsCredential", () => {
  const check = (changes: Partial<AwsCredential> = {}, optionChanges = {}) =>
    verifyAwsCredential({ ...credential, ...changes }, { ...options, ...optionChanges }, signal());

  it("passes for a working credential with one DescribeRegions, no connector needed", async () => {
    const before = emulator.calls.DescribeRegions ?? 0;
    await expect(check()).resolves.toBeUndefined();
    expect(emulator.calls.DescribeRegions).toBe(before + 1);
  });

  it("refuses a wrong secret at secret_key and an unknown access key at access_key", async () => {
    const wrongSecret = "not-the-secret-at-all-0123456789";
    const signature = await failureOf(check({ secret_key: wrongSecret }));
    expect(signature).toMatchObject({
      operation: "DescribeRegions",
      failure: "auth",
      field: "secret_key",
      cloudCode: "SignatureDoesNotMatch",
    });
    expect(signature.message).not.toContain(wrongSecret);
    const unknown = await failureOf(check({ access_key: "AKIAUNKNOWNKEY000001" }));
    expect(unknown).toMatchObject({
      failure: "auth",
      field: "access_key",
      cloudCode: "AuthFailure",
    });
  });

  it("a cloud that does not answer is unavailable", async () => {
    const error = await failureOf(check({}, { endpoint: `https://127.0.0.1:${await freePort()}` }));
    expect(error).toMatchObject({ operation: "DescribeRegions", failure: "unavailable" });
  });
});

describe("opt-in regions", () => {
  it("a credential that works is refused where the account has not opted in", async () => {
    const error = await failureOf(client({ config: { region: "ap-east-1" } }).verify(signal()));
    expect(error).toMatchObject({ failure: "auth", field: "access_key", cloudCode: "AuthFailure" });
  });
});
