/**
 * The GCP client against the Compute Engine emulator (testkit/upstreams/gcp-emulator.ts): its
 * instances boot a real tinyproxy with the start-up script's login, so a created instance is a
 * proxy a request goes through. Failures are switched on in the emulator and read as the scale
 * job reads them: CloudCallError's failure and field.
 */
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import * as v from "valibot";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { gcpClient, type GcpClientOptions, verifyGcpCredential } from "../../control/cloud/gcp.ts";
import type { CloudClient, CloudLaunch } from "../../control/cloud/contract.ts";
import { instanceName } from "../../control/cloud/naming.ts";
import { type ProxyLogin, startupScript } from "../../control/cloud/startup-script.ts";
import { GcpConnectorConfig, type GcpCredential } from "../../control/model/cloud.ts";
import { probe } from "../../control/upstream/index.ts";
import { CloudCallError } from "../../shared/errors.ts";
import { UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import { type GcpEmulator, startGcpEmulator } from "../../testkit/upstreams/gcp-emulator.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";

const PROJECT = "octoprox-test";
const OTHER_PROJECT = "someone-else";
const ZONE = "europe-west1-b";
/** The connector's tags, as its owner wrote them (GCP labels are lower case). */
const TAGS = { Team: "Proxies", env: "test" };

let emulator: GcpEmulator;
let origin: Origin;

beforeAll(async () => {
  [emulator, origin] = await Promise.all([
    startGcpEmulator({ accounts: [PROJECT, OTHER_PROJECT] }),
    startOrigin(),
  ]);
});

afterAll(async () => {
  await Promise.all([emulator?.close(), origin?.close()]);
});

// Every switch back off, whatever a test left on.
afterEach(() => {
  emulator.refuseCreates(false);
  emulator.slowCreates(false);
  emulator.slowDeletes(false);
  emulator.failListings(false);
  emulator.loseOperations(false);
});

const credential = (overrides: Partial<GcpCredential> = {}): GcpCredential => ({
  service_account_json: emulator.serviceAccount(PROJECT),
  project_id: PROJECT,
  ...overrides,
});

const connectorConfig = (overrides: Record<string, unknown> = {}) =>
  v.parse(GcpConnectorConfig, {
    instance_name: "ox-proxy",
    zone: ZONE,
    machine_type: "e2-micro",
    tags: TAGS,
    ...overrides,
  });

function client(
  overrides: {
    credential?: GcpCredential;
    config?: Record<string, unknown>;
    options?: Partial<GcpClientOptions>;
    on?: GcpEmulator;
  } = {},
): CloudClient {
  const on = overrides.on ?? emulator;
  return gcpClient(overrides.credential ?? credential(), connectorConfig(overrides.config), {
    endpoint: on.url,
    tokenUrl: on.tokenUrl,
    createTimeoutMs: 20_000,
    pollIntervalMs: 20,
    callTimeoutMs: 5_000,
    ca: undefined,
    ...overrides.options,
  });
}

const signal = () => AbortSignal.timeout(30_000);

/** A launch as the scale job makes one: a fresh name and login, the script carrying it. */
async function launch(connectorId: string): Promise<CloudLaunch & { login: ProxyLogin }> {
  const login = {
    username: `u${randomBytes(6).toString("hex")}`,
    password: randomBytes(18).toString("base64").replace(/[^A-Za-z0-9]/g, "x"),
    port: await freePort(),
  };
  return {
    name: instanceName("gcp", "ox-proxy", Date.now()),
    connectorId,
    tags: TAGS,
    startupScript: startupScript(login),
    login,
  };
}

const connectorId = () => randomUUID();

/** The CloudCallError a call rejects with (fails the test when it resolves). */
async function failureOf(call: Promise<unknown>): Promise<CloudCallError> {
  const error = await call.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(CloudCallError);
  return error as CloudCallError;
}

describe("create", () => {
  it("launches an instance whose proxy takes the start-up script's login and no other", async () => {
    const id = connectorId();
    const wanted = await launch(id);
    const instance = await client().create(wanted, signal());

    expect(instance).toMatchObject({
      name: wanted.name,
      id: `gcp-${wanted.name}`,
      state: "running",
    });
    const proxy = { scheme: "http" as const, host: instance.address, port: wanted.login.port };
    const through = await probe({
      proxy: { ...proxy, username: wanted.login.username, password: wanted.login.password },
      url: `${origin.url}/ip`,
      timeoutMs: 5_000,
    });
    expect(through.status).toBe(200);
    expect(through.exitIp).toBe(instance.address);

    const refused = await probe({ proxy, url: `${origin.url}/ip`, timeoutMs: 5_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(UpstreamHandshakeError);
    expect((refused as UpstreamHandshakeError).status).toBe(407);
  });

  it("labels the instance with its connector and tags; only the script's metadata holds the login", async () => {
    const id = connectorId();
    const wanted = await launch(id);
    await client().create(wanted, signal());

    const [created] = emulator.instances().filter((each) => each.name === wanted.name);
    expect(created.labels).toEqual({ team: "proxies", env: "test", "octoprox-connector": id });
    expect(Object.keys(created.metadata)).toEqual(["startup-script"]);
    expect(created.metadata["startup-script"]).toBe(wanted.startupScript);
    expect(JSON.stringify(created.labels)).not.toContain(wanted.login.password);
    expect(created).toMatchObject({ project: PROJECT, zone: ZONE, status: "RUNNING" });
  });

  it("a launch tried again with the same name waits for the instance the first try made", async () => {
    const wanted = await launch(connectorId());
    const first = await client().create(wanted, signal());
    const again = await client().create(wanted, signal());

    expect(again).toEqual(first);
    expect(emulator.instances().filter((each) => each.name === wanted.name)).toHaveLength(1);
  });

  it("a zone out of capacity, a quota and a rate limit are refused, refused and throttled", async () => {
    const wanted = await launch(connectorId());
    emulator.refuseCreates("ZONE_RESOURCE_POOL_EXHAUSTED");
    const exhausted = await failureOf(client().create(wanted, signal()));
    expect(exhausted).toMatchObject({
      provider: "gcp",
      operation: "create",
      failure: "refused",
      cloudCode: "ZONE_RESOURCE_POOL_EXHAUSTED",
      field: "zone",
    });

    emulator.refuseCreates("QUOTA_EXCEEDED");
    const quota = await failureOf(client().create(wanted, signal()));
    expect(quota).toMatchObject({ failure: "refused", cloudCode: "QUOTA_EXCEEDED" });

    emulator.refuseCreates("rateLimitExceeded");
    const limited = await failureOf(client().create(wanted, signal()));
    expect(limited).toMatchObject({ failure: "throttled", status: 429 });

    // Nothing was launched, and no message quotes the script or its password.
    expect(emulator.instances().some((each) => each.name === wanted.name)).toBe(false);
    for (const error of [exhausted, quota, limited]) {
      expect(error.message).not.toContain(wanted.login.password);
      expect(error.message).not.toContain("OCTOPROX_PROXY");
    }
  });

  it("an instance that does not run within the create timeout is a timeout; it runs later", async () => {
    emulator.slowCreates(true);
    const wanted = await launch(connectorId());
    const error = await failureOf(
      client({ options: { createTimeoutMs: 300 } }).create(wanted, signal()),
    );
    expect(error).toMatchObject({ failure: "timeout", operation: "create" });
    expect(error.message).toContain(wanted.name);
    expect(emulator.instances().find((each) => each.name === wanted.name)?.status).toBe(
      "PROVISIONING",
    );

    emulator.slowCreates(false);
    const late = await client().create(wanted, signal());
    expect(late.state).toBe("running");
  });

  it("an unknown machine type or network is refused at its field", async () => {
    const wanted = await launch(connectorId());
    const type = await failureOf(
      client({ config: { machine_type: "x9-huge" } }).create(wanted, signal()),
    );
    expect(type).toMatchObject({ failure: "refused", field: "machine_type", status: 400 });
    const network = await failureOf(
      client({ config: { network: "nowhere" } }).create(wanted, signal()),
    );
    expect(network).toMatchObject({ failure: "refused", field: "network", status: 404 });
  });

  it("stops waiting when its signal aborts", async () => {
    emulator.slowCreates(true);
    const controller = new AbortController();
    const wanted = await launch(connectorId());
    const pending = client().create(wanted, controller.signal);
    await waitUntil(() => emulator.instances().some((each) => each.name === wanted.name), {
      message: "the insert",
    });
    controller.abort(new Error("scale run stopped"));
    await expect(pending).rejects.toThrow("scale run stopped");
  });
});

describe("list", () => {
  it("makes one instances.list call and returns the connector's pending and running instances", async () => {
    const id = connectorId();
    const gcp = client();
    const [running, stopped] = [await launch(id), await launch(id)];
    const [elsewhere] = [await launch(connectorId())];
    const up = await gcp.create(running, signal());
    await gcp.create(stopped, signal());
    await gcp.create(elsewhere, signal());
    await emulator.stopInstance(stopped.name);

    emulator.slowCreates(true);
    const controller = new AbortController();
    const pendingLaunch = await launch(id);
    const creating = gcp.create(pendingLaunch, controller.signal).catch(() => undefined);
    await waitUntil(() => emulator.instances().some((each) => each.name === pendingLaunch.name), {
      message: "the pending instance",
    });

    const before = emulator.calls["instances.list"];
    const listed = await gcp.list(id, signal());
    expect(emulator.calls["instances.list"] - before).toBe(1);
    expect(listed.sort((a, b) => a.state.localeCompare(b.state))).toEqual([
      {
        name: pendingLaunch.name,
        id: `gcp-${pendingLaunch.name}`,
        state: "pending",
        address: null,
      },
      { name: running.name, id: `gcp-${running.name}`, state: "running", address: up.address },
    ]);
    controller.abort();
    await creating;
  });

  it("follows the pages a listing has, and only those", async () => {
    const paged = await startGcpEmulator({ accounts: [PROJECT], maxPageSize: 1 });
    try {
      const id = connectorId();
      const gcp = client({
        on: paged,
        credential: credential({ service_account_json: paged.serviceAccount(PROJECT) }),
      });
      expect(await gcp.list(id, signal())).toEqual([]);
      expect(paged.calls["instances.list"]).toBe(1);
      const launches = [await launch(id), await launch(id)];
      await Promise.all(launches.map((each) => gcp.create(each, signal())));
      const listed = await gcp.list(id, signal());
      expect(listed.map((each) => each.name).sort()).toEqual(
        launches.map((each) => each.name).sort(),
      );
      expect(paged.calls["instances.list"]).toBe(3);
    } finally {
      await paged.close();
    }
  });

  it("a listing the cloud fails is unavailable", async () => {
    emulator.failListings(true);
    const error = await failureOf(client().list(connectorId(), signal()));
    expect(error).toMatchObject({ failure: "unavailable", status: 503, operation: "list" });
    emulator.failListings(false);
    expect(await client().list(connectorId(), signal())).toEqual([]);
  });
});

describe("terminate", () => {
  it("waits for the delete operation, stops the proxy, and is idempotent", async () => {
    const wanted = await launch(connectorId());
    const gcp = client();
    const instance = await gcp.create(wanted, signal());

    emulator.slowDeletes(true);
    let settled = false;
    const terminating = gcp.terminate(instance.id, signal()).finally(() => (settled = true));
    const polls = emulator.calls["zoneOperations.get"];
    await waitUntil(() => emulator.calls["zoneOperations.get"] > polls + 2, {
      message: "the delete operation polled",
    });
    expect(settled).toBe(false);
    expect(emulator.instances().some((each) => each.name === wanted.name)).toBe(true);

    emulator.slowDeletes(false);
    await terminating;
    expect(emulator.instances().some((each) => each.name === wanted.name)).toBe(false);
    expect(await portAccepts(instance.address, wanted.login.port)).toBe(false);

    await gcp.terminate(instance.id, signal());
    await gcp.terminate("gcp-never-launched-here", signal());
  });

  it("an id that is not a GCP instance's is refused without a call", async () => {
    const deletes = emulator.calls["instances.delete"];
    const error = await failureOf(client().terminate("aws-i-0123456789abcdef0", signal()));
    expect(error).toMatchObject({ failure: "refused", operation: "terminate" });
    expect(emulator.calls["instances.delete"]).toBe(deletes);
  });
});

describe("lost operations", () => {
  it("an insert whose operation is lost still waits for its instance", async () => {
    emulator.loseOperations(true);
    const wanted = await launch(connectorId());
    const instance = await client().create(wanted, signal());
    expect(instance.state).toBe("running");
  });

  it("a delete whose operation is lost is done when the instance is going", async () => {
    const gcp = client();
    const instance = await gcp.create(await launch(connectorId()), signal());
    emulator.loseOperations(true);
    await gcp.terminate(instance.id, signal());
    await waitUntil(() => !emulator.instances().some((each) => each.name === instance.name), {
      message: "the instance removed",
    });
  });

  it("is lost when the cloud knows neither the operation nor an instance still running", async () => {
    const gcp = client();
    const instance = await gcp.create(await launch(connectorId()), signal());
    emulator.loseOperations(true);
    emulator.slowDeletes(true);
    const deleteLost = await failureOf(gcp.terminate(instance.id, signal()));
    expect(deleteLost).toMatchObject({ failure: "lost", operation: "terminate" });

    emulator.refuseCreates("ZONE_RESOURCE_POOL_EXHAUSTED");
    const insertLost = await failureOf(gcp.create(await launch(connectorId()), signal()));
    expect(insertLost).toMatchObject({ failure: "lost", operation: "create" });
  });
});

describe("verify", () => {
  it("passes for the connector's zone, machine type and network", async () => {
    const reads = ["zones.get", "machineTypes.get", "networks.get"] as const;
    const before = reads.map((name) => emulator.calls[name]);
    await client().verify(signal());
    expect(reads.map((name, index) => emulator.calls[name] - before[index])).toEqual([1, 1, 1]);
  });

  it("refuses a key the account does not have as auth, at service_account_json", async () => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const file = JSON.parse(emulator.serviceAccount(PROJECT));
    file.private_key = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    const wrong = JSON.stringify(file);
    const error = await failureOf(
      client({ credential: credential({ service_account_json: wrong }) }).verify(signal()),
    );
    expect(error).toMatchObject({
      failure: "auth",
      field: "service_account_json",
      cloudCode: "invalid_grant",
    });
    expect(error.message).not.toContain("PRIVATE KEY");
    expect(error.message).not.toContain(file.private_key.split("\n")[1]);
  });

  it("refuses another project as auth, at project_id", async () => {
    const error = await failureOf(
      client({ config: { project_id: OTHER_PROJECT } }).verify(signal()),
    );
    expect(error).toMatchObject({ failure: "auth", field: "project_id", status: 403 });
  });

  it("refuses an unknown zone, machine type and network at their fields", async () => {
    const zone = await failureOf(client({ config: { zone: "mars-north1-a" } }).verify(signal()));
    expect(zone).toMatchObject({ failure: "refused", field: "zone", status: 404 });
    const type = await failureOf(client({ config: { machine_type: "x9-huge" } }).verify(signal()));
    expect(type).toMatchObject({ failure: "refused", field: "machine_type", status: 404 });
    const network = await failureOf(client({ config: { network: "nowhere" } }).verify(signal()));
    expect(network).toMatchObject({ failure: "refused", field: "network", status: 404 });
  });

  it("asks the configured token URL, never the key file's own token_uri", async () => {
    const file = JSON.parse(emulator.serviceAccount(PROJECT));
    file.token_uri = `${emulator.url}/elsewhere/token`;
    const tokens = emulator.calls.token;
    const unknown = emulator.calls.unknown;
    await client({ credential: credential({ service_account_json: JSON.stringify(file) }) })
      .verify(signal());
    expect(emulator.calls.token).toBe(tokens + 1);
    expect(emulator.calls.unknown).toBe(unknown);
  });

  it("a cloud that does not answer is unavailable", async () => {
    const closed = await startGcpEmulator({ accounts: [PROJECT] });
    const key = closed.serviceAccount(PROJECT);
    await closed.close();
    const error = await failureOf(
      client({ on: closed, credential: credential({ service_account_json: key }) }).verify(
        signal(),
      ),
    );
    expect(error).toMatchObject({ failure: "unavailable" });
  });

  it("trusts the given CA instead of the system's", async () => {
    const secure = await startGcpEmulator({ accounts: [PROJECT], tls: true });
    try {
      const over = (ca: string | undefined) =>
        client({
          on: secure,
          credential: credential({ service_account_json: secure.serviceAccount(PROJECT) }),
          options: { ca },
        });
      await over(secure.ca).verify(signal());
      const untrusted = await failureOf(over(undefined).verify(signal()));
      expect(untrusted).toMatchObject({ failure: "unavailable" });
    } finally {
      await secure.close();
    }
  });
});

describe("verifyGcpCredential", () => {
  const check = (overrides: Partial<GcpCredential> = {}) =>
    verifyGcpCredential(credential(overrides), {
      endpoint: emulator.url,
      tokenUrl: emulator.tokenUrl,
      createTimeoutMs: 20_000,
      pollIntervalMs: 20,
      callTimeoutMs: 5_000,
      ca: undefined,
    }, signal());

  it("passes with a token and one zones.list page of the project, no connector needed", async () => {
    const reads = ["token", "zones.list", "zones.get"] as const;
    const before = reads.map((name) => emulator.calls[name]);
    await check();
    expect(reads.map((name, index) => emulator.calls[name] - before[index])).toEqual([1, 1, 0]);
  });

  it("refuses a key the account does not have at service_account_json", async () => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const file = JSON.parse(emulator.serviceAccount(PROJECT));
    file.private_key = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    const error = await failureOf(check({ service_account_json: JSON.stringify(file) }));
    expect(error).toMatchObject({
      failure: "auth",
      field: "service_account_json",
      cloudCode: "invalid_grant",
    });
    expect(error.message).not.toContain("PRIVATE KEY");
  });

  it("refuses a project the account may not use at project_id", async () => {
    const error = await failureOf(check({ project_id: OTHER_PROJECT }));
    expect(error).toMatchObject({ failure: "auth", field: "project_id", status: 403 });
    expect(error.message).toContain("zones.list answered 403");
  });
});
