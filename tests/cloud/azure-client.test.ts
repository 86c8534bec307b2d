/**
 * The Azure client with the real SDKs against the Azure emulator (Entra token endpoint and
 * Resource Manager over HTTPS): instances that boot a real proxy with the start-up script's
 * login, one-call listings, terminations that leave nothing behind, the verify checks, and each
 * failure as the scale job sees it.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { azureClient, verifyAzureCredential } from "../../control/cloud/azure.ts";
import type { CloudClient, CloudLaunch } from "../../control/cloud/contract.ts";
import { startupScript } from "../../control/cloud/startup-script.ts";
import type { AzureConnector, AzureCredential } from "../../control/model/cloud.ts";
import { probe } from "../../control/upstream/index.ts";
import { CloudCallError } from "../../shared/errors.ts";
import { UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import {
  type AzureEmulator,
  type AzureEmulatorOptions,
  startAzureEmulator,
} from "../../testkit/upstreams/azure-emulator.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";

const SUBSCRIPTION = "6f1c2a4e-0b7d-4e51-9a3c-2d8f5e7a9b10";
const TENANT = "0c8e4d2a-5b1f-4c93-8e7a-1f2d3c4b5a69";
const CLIENT_ID = "a3b5c7d9-1e2f-4a6b-8c0d-9e8f7a6b5c4d";
const CLIENT_SECRET = "Xq8~secret.value-for_the~emulator";

const credential: AzureCredential = {
  subscription_id: SUBSCRIPTION,
  tenant_id: TENANT,
  client_id: CLIENT_ID,
  client_secret: CLIENT_SECRET,
};

const connector = {
  instance_name: "ox-azure",
  subscription_id: null,
  resource_group: "octoprox-rg",
  location: "westeurope",
  vm_size: "Standard_B1s",
  vnet_name: "octoprox-vnet",
  subnet_name: "proxies",
  ssh_public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBtestkeyfortheemulator octoprox",
  min_proxies: 1,
  max_proxies: 10,
  min_rotation_period_minutes: 60,
  max_rotation_period_minutes: 1440,
  tags: { team: "edge", cost_center: "42" },
};

const emulatorOptions: AzureEmulatorOptions = {
  subscriptionId: SUBSCRIPTION,
  principals: [{ tenantId: TENANT, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET }],
  resourceGroups: [{
    name: "octoprox-rg",
    location: "westeurope",
    virtualNetworks: { "octoprox-vnet": ["proxies"] },
  }],
  vmSizes: { westeurope: ["Standard_B1s", "Standard_B2s"], northeurope: ["Standard_B1s"] },
};

let azure: AzureEmulator;
let origin: Origin;

beforeAll(async () => {
  [azure, origin] = await Promise.all([startAzureEmulator(emulatorOptions), startOrigin()]);
});

afterAll(async () => {
  await Promise.all([azure?.close(), origin?.close()]);
});

function clientOf(
  emulator: AzureEmulator,
  overrides: {
    credential?: Partial<AzureCredential>;
    connector?: Partial<typeof connector>;
    createTimeoutMs?: number;
    ca?: string | undefined;
  } = {},
): CloudClient {
  return azureClient(
    { ...credential, ...overrides.credential },
    { ...connector, ...overrides.connector } as AzureConnector,
    {
      endpoint: emulator.url,
      authority: emulator.authority,
      ca: "ca" in overrides ? overrides.ca : emulator.ca,
      createTimeoutMs: overrides.createTimeoutMs ?? 20_000,
      pollIntervalMs: 20,
      callTimeoutMs: 5_000,
    },
  );
}

const client = (overrides: Parameters<typeof clientOf>[1] = {}) => clientOf(azure, overrides);

const signal = () => AbortSignal.timeout(30_000);

interface TestLaunch extends CloudLaunch {
  login: { username: string; password: string; port: number };
}

/** A launch with a login of its own, as the scale job makes one. */
async function launchOf(
  prefix: string,
  connectorId = "conn-main",
  tags: Record<string, string> = connector.tags,
): Promise<TestLaunch> {
  const login = {
    username: `u${randomBytes(4).toString("hex")}`,
    password: `P${randomBytes(9).toString("hex")}`,
    port: await freePort(),
  };
  return {
    name: `${prefix}-${Math.floor(Date.now() / 1000)}-${randomBytes(3).toString("hex")}`,
    connectorId,
    tags,
    startupScript: startupScript(login),
    login,
  };
}

/** The CloudCallError a call rejects with (failing the test if it resolves). */
async function failureOf(call: Promise<unknown>): Promise<CloudCallError> {
  const outcome = await call.then(() => undefined, (error: unknown) => error);
  expect(outcome).toBeInstanceOf(CloudCallError);
  return outcome as CloudCallError;
}

/** ARM's calls since `before` (the identity platform's left out). */
function armCallsSince(before: Record<string, number>): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [key, count] of Object.entries(azure.calls)) {
    if (key === "POST token" || key === "GET openid-configuration") continue;
    if (count !== (before[key] ?? 0)) delta[key] = count - (before[key] ?? 0);
  }
  return delta;
}

const resourcesOf = (name: string, emulator = azure) =>
  emulator.resources().filter((resource) => resource.startsWith(`${name}-`));

describe("create", () => {
  it("returns a running instance whose proxy takes the start-up script's login", async () => {
    const launch = await launchOf("ox-create");
    const instance = await client().create(launch, signal());

    expect(instance).toMatchObject({
      name: launch.name,
      id: `azure-${launch.name}`,
      state: "running",
    });
    const vm = azure.instances().find((candidate) => candidate.name === launch.name);
    expect(vm?.provisioningState).toBe("Succeeded");
    expect(instance.address).toBe(vm?.address);
    const proxy = { scheme: "http" as const, host: instance.address, port: launch.login.port };
    const through = await probe({
      proxy: { ...proxy, username: launch.login.username, password: launch.login.password },
      url: `${origin.url}/ip`,
      timeoutMs: 5_000,
    });
    expect(through.ok).toBe(true);
    expect(through.exitIp).toBe(instance.address);
    const refused = await probe({ proxy, url: `${origin.url}/ip`, timeoutMs: 5_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(UpstreamHandshakeError);
    expect((refused as UpstreamHandshakeError).status).toBe(407);
    // Its NIC, IP and disk, named after it; they go with it.
    expect(resourcesOf(launch.name)).toEqual(
      ["nic", "osdisk", "pip"].map((suffix) => `${launch.name}-${suffix}`),
    );
    await client().terminate(instance.id, signal());
    expect(resourcesOf(launch.name)).toEqual([]);
  });

  it("tags the VM with the connector's tags and its id, and no tag holds the login", async () => {
    // A tag of the launch's own by the Octoprox name does not replace the connector's id.
    const launch = await launchOf("ox-tags", "conn-tags", {
      ...connector.tags,
      "octoprox-connector": "someone-else",
    });
    const instance = await client().create(launch, signal());

    const vm = azure.instances().find((candidate) => candidate.name === launch.name);
    expect(vm?.tags).toEqual({ ...connector.tags, "octoprox-connector": "conn-tags" });
    for (const value of [...Object.keys(vm?.tags ?? {}), ...Object.values(vm?.tags ?? {})]) {
      expect(value).not.toContain(launch.login.password);
    }
    // The custom data is the one place the login travels.
    expect(vm?.customData).toBe(launch.startupScript);
    await client().terminate(instance.id, signal());
  });

  it("maps a refused VM to `refused` at vm_size, leaving no NIC or IP behind", async () => {
    const launch = await launchOf("ox-refused");
    azure.refuseCreates("SkuNotAvailable");
    try {
      const error = await failureOf(client().create(launch, signal()));
      expect(error).toMatchObject({
        failure: "refused",
        field: "vm_size",
        cloudCode: "SkuNotAvailable",
        status: 409,
      });
      expect(error.message).not.toContain(launch.login.password);
      expect(error.message).not.toContain(CLIENT_SECRET);
    } finally {
      azure.refuseCreates(null);
    }
    expect(azure.instances().map((vm) => vm.name)).not.toContain(launch.name);
    expect(resourcesOf(launch.name)).toEqual([]);
  });

  it("maps an operation that ends Failed to `refused` and deletes the failed VM", async () => {
    const launch = await launchOf("ox-failed");
    azure.refuseCreates("QuotaExceeded", { during: "operation" });
    try {
      const error = await failureOf(client().create(launch, signal()));
      expect(error).toMatchObject({ failure: "refused", cloudCode: "QuotaExceeded" });
    } finally {
      azure.refuseCreates(null);
    }
    expect(azure.instances().map((vm) => vm.name)).not.toContain(launch.name);
    expect(resourcesOf(launch.name)).toEqual([]);
  });

  it("times out on a VM that stays Creating; the listing shows it pending", async () => {
    const launch = await launchOf("ox-slow", "conn-slow");
    azure.slowCreates(true);
    try {
      const started = Date.now();
      const error = await failureOf(client({ createTimeoutMs: 1_500 }).create(launch, signal()));
      expect(error.failure).toBe("timeout");
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await client().list("conn-slow", signal())).toEqual([
        { name: launch.name, id: `azure-${launch.name}`, state: "pending", address: null },
      ]);
    } finally {
      azure.slowCreates(false);
    }
    // Released, it boots; then it goes like any other.
    await waitUntil(
      () =>
        azure.instances().find((vm) => vm.name === launch.name)?.provisioningState === "Succeeded",
      { message: "the held VM to boot" },
    );
    await client().terminate(`azure-${launch.name}`, signal());
    expect(resourcesOf(launch.name)).toEqual([]);
  });

  it("maps operations the cloud lost to `lost`", async () => {
    const launch = await launchOf("ox-lost");
    azure.loseOperations(true);
    try {
      const error = await failureOf(client().create(launch, signal()));
      expect(error).toMatchObject({ failure: "lost", status: 404 });
    } finally {
      azure.loseOperations(false);
    }
    await client().terminate(`azure-${launch.name}`, signal());
  });
});

describe("list", () => {
  it("makes one VM list call and returns only the connector's VMs", async () => {
    const [mine, theirs] = await Promise.all([
      launchOf("ox-mine", "conn-list"),
      launchOf("ox-theirs", "conn-other"),
    ]);
    const created = await Promise.all([
      client().create(mine, signal()),
      client().create(theirs, signal()),
    ]);
    const listing = client();
    await listing.verify(signal());
    const before = azure.calls;

    const found = await listing.list("conn-list", signal());

    expect(found).toEqual([
      { name: mine.name, id: `azure-${mine.name}`, state: "running", address: null },
    ]);
    expect(armCallsSince(before)).toEqual({ "LIST virtualMachines": 1 });
    await Promise.all(created.map((instance) => client().terminate(instance.id, signal())));
  });

  it("follows nextLink pages when the listing has more", async () => {
    const paged = await startAzureEmulator({ ...emulatorOptions, listPageSize: 1 });
    try {
      const launches = await Promise.all([launchOf("ox-page"), launchOf("ox-page")]);
      const pagedClient = clientOf(paged);
      await Promise.all(launches.map((launch) => pagedClient.create(launch, signal())));
      const before = paged.calls["LIST virtualMachines"] ?? 0;

      const found = await pagedClient.list("conn-main", signal());

      expect(found.map((instance) => instance.name).sort()).toEqual(
        launches.map((launch) => launch.name).sort(),
      );
      expect((paged.calls["LIST virtualMachines"] ?? 0) - before).toBe(2);
    } finally {
      await paged.close();
    }
  });

  it("maps a failing listing to `unavailable` and throttling to `throttled`", async () => {
    azure.failListings(true);
    try {
      const error = await failureOf(client().list("conn-main", signal()));
      expect(error).toMatchObject({ failure: "unavailable", status: 503 });
    } finally {
      azure.failListings(false);
    }
    azure.throttle(true);
    try {
      const error = await failureOf(client().list("conn-main", signal()));
      expect(error).toMatchObject({ failure: "throttled", status: 429 });
    } finally {
      azure.throttle(false);
    }
  });
});

describe("terminate", () => {
  it("is idempotent and leaves no VM, NIC, IP or disk, and no proxy", async () => {
    const launch = await launchOf("ox-term");
    const instance = await client().create(launch, signal());

    // Two at once (the second finds the delete under way), then once more, then a stranger.
    await Promise.all([
      client().terminate(instance.id, signal()),
      client().terminate(instance.id, signal()),
    ]);
    await client().terminate(instance.id, signal());
    await client().terminate("azure-ox-never-made-1-abcdef", signal());

    expect(azure.instances().map((vm) => vm.name)).not.toContain(launch.name);
    expect(resourcesOf(launch.name)).toEqual([]);
    expect(await portAccepts(instance.address, launch.login.port)).toBe(false);
  });
});

describe("verify", () => {
  it("passes with a working credential, resource group, location and size", async () => {
    await client().verify(signal());
  });

  it("refuses a wrong secret, client id or tenant as `auth` at that field", async () => {
    const cases = [
      [{ client_secret: "not-the-secret" }, "client_secret"],
      [{ client_id: "b4c6d8e0-2f3a-4b7c-9d1e-0f9a8b7c6d5e" }, "client_id"],
      [{ tenant_id: "1d9f5e3b-6c2a-4da4-9f8b-2a3b4c5d6e7f" }, "tenant_id"],
    ] as const;
    for (const [wrong, field] of cases) {
      const error = await failureOf(client({ credential: wrong }).verify(signal()));
      expect(error).toMatchObject({ failure: "auth", field });
      expect(error.message).not.toContain(CLIENT_SECRET);
      expect(error.message).not.toContain("not-the-secret");
    }
  });

  it("refuses an unknown resource group, location or VM size at its field", async () => {
    const cases = [
      [{ resource_group: "no-such-rg" }, "resource_group"],
      [{ location: "atlantis" }, "location"],
      [{ vm_size: "Standard_Z99" }, "vm_size"],
      // Offered elsewhere, not here.
      [{ location: "northeurope", vm_size: "Standard_B2s" }, "vm_size"],
    ] as const;
    for (const [wrong, field] of cases) {
      const error = await failureOf(client({ connector: wrong }).verify(signal()));
      expect(error).toMatchObject({ failure: "refused", field });
    }
  });

  it("trusts the CA it is given instead of the system's", async () => {
    const error = await failureOf(client({ ca: undefined }).verify(signal()));
    expect(error.failure).toBe("unavailable");
  });
});

describe("verifyAzureCredential", () => {
  const check = (wrong: Partial<AzureCredential> = {}) =>
    verifyAzureCredential({ ...credential, ...wrong }, {
      endpoint: azure.url,
      authority: azure.authority,
      ca: azure.ca,
      createTimeoutMs: 20_000,
      pollIntervalMs: 20,
      callTimeoutMs: 5_000,
    }, signal());

  it("passes with a token and one read of the subscription, no connector needed", async () => {
    const before = { ...azure.calls };
    await check();
    expect(armCallsSince(before)).toEqual({ "GET subscriptions": 1 });
  });

  it("refuses a wrong secret, client id, tenant or subscription at that field", async () => {
    const cases = [
      [{ client_secret: "not-the-secret" }, "client_secret"],
      [{ client_id: "b4c6d8e0-2f3a-4b7c-9d1e-0f9a8b7c6d5e" }, "client_id"],
      [{ tenant_id: "1d9f5e3b-6c2a-4da4-9f8b-2a3b4c5d6e7f" }, "tenant_id"],
      [{ subscription_id: "7e2d3b5f-1c8a-4f60-8b4d-3e9f6a8c0d21" }, "subscription_id"],
    ] as const;
    for (const [wrong, field] of cases) {
      const error = await failureOf(check(wrong));
      expect(error).toMatchObject({ failure: "auth", field });
      expect(error.message).not.toContain(CLIENT_SECRET);
      expect(error.message).not.toContain("not-the-secret");
    }
  });
});
