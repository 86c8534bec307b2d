/**
 * A cloud connector from the dashboard in a real browser (Debian's chromium, driven by
 * playwright-core) against a real control process (role all: the api serving the built app, the
 * controller, and a worker running the scale job every second) and the EC2 emulator
 * (testkit/clouds.ts), whose instances boot a real proxy. An admin creates an AWS credential
 * from its form (the secret a masked input, kept when left blank on an edit), then a cloud
 * connector from the connector form: an AMI the cloud does not know is refused at its field,
 * nothing saved; the right one is saved. The connector page then shows the instance the scale
 * job made, with its address, the target and why the run held; an edit saves the config whole;
 * the System page counts it. The
 * deletion says the instances terminate first, shows the connector pending deletion, and ends
 * with it gone, its instance terminated.
 */
import { randomBytes } from "node:crypto";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { startTestClouds, type TestClouds } from "../../testkit/clouds.ts";
import { Cluster } from "../../testkit/cluster.ts";
import { freePort } from "../../testkit/ports.ts";
import { AWS_EMULATOR_IMAGE } from "../../testkit/upstreams/aws-emulator.ts";

let clouds: TestClouds;
let cluster: Cluster;
let browser: Browser;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  clouds = await startTestClouds();
  cluster = await Cluster.create({
    env: {
      ...clouds.env,
      OCTOPROX_METRICS_FLUSH_INTERVAL: "3600",
      OCTOPROX_SCALE_INTERVAL: "1",
      OCTOPROX_CLOUD_PROXY_PORT: String(await freePort()),
      OCTOPROX_CLOUD_POLL_INTERVAL: "0.1",
    },
  });
  await cluster.start("all");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await clouds?.close();
});

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

async function newProject(): Promise<string> {
  const name = `cl${randomBytes(4).toString("hex")}`;
  const project = await cluster.request("POST", "/api/v1/projects", { name, username: name });
  expect(project.status).toBe(201);
  return project.body.id;
}

const fieldError = (form: Locator, field: string) =>
  form.locator(`[data-field="${field}"] .field-error`);

/** Waits for a value that comes from a live cluster: the scale job, a boot, a deletion. */
const slowly = <T>(read: () => T | Promise<T>) =>
  expect.poll(read, { timeout: 60_000, interval: 250 });

describe("a cloud connector in the dashboard", () => {
  it("is made from the forms, shows its running instance, and is deleted once it terminated", async () => {
    const aws = clouds.clouds.aws;
    const projectId = await newProject();
    const page = await asAdmin();

    // The credential: the AWS account's keys, the secret a masked input.
    await page.goto(`/projects/${projectId}/credentials`);
    await page.getByText("No credentials yet.").waitFor();
    await page.getByRole("button", { name: "New credential" }).click();
    const credentialForm = page.getByRole("form", { name: "Credential" });
    await credentialForm.getByLabel("Name", { exact: true }).fill("aws-main");
    await credentialForm.getByLabel(/^Provider/).selectOption("aws");
    const secret = credentialForm.getByLabel(/^Secret access key/);
    expect(await secret.getAttribute("type")).toBe("password");
    await credentialForm.getByLabel(/^Access key ID/).fill(String(aws.credential.access_key));
    await secret.fill(String(aws.credential.secret_key));
    await credentialForm.getByRole("button", { name: "Create credential" }).click();
    await page.getByRole("heading", { name: "aws-main" }).waitFor();
    const [credential] = (await cluster.request("GET", `/api/v1/projects/${projectId}/credentials`))
      .body;
    expect(credential).toMatchObject({
      provider: "aws",
      config: { access_key: aws.credential.access_key, secret_key: "********" },
      has_secret_key: true,
    });

    // An edit leaving the secret blank keeps it: the connector below is checked with it.
    const edit = page.getByRole("form", { name: "Credential" });
    expect(await edit.getByLabel(/^Secret access key/).inputValue()).toBe("");
    await edit.getByText("Set; leave blank to keep it").waitFor();
    await edit.getByLabel("Name", { exact: true }).fill("aws-account");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();

    // The connector, started from the credential's page: cloud, AWS and the credential chosen.
    await page.getByRole("link", { name: "New connector on this credential" }).click();
    const form = page.getByRole("form", { name: "Connector" });
    expect(await form.getByLabel(/^Kind/).inputValue()).toBe("cloud");
    expect(await form.getByLabel(/^Cloud/).inputValue()).toBe("aws");
    expect(await form.getByLabel(/^Credential/).inputValue()).toBe(credential.id);
    await form.getByLabel("Name", { exact: true }).fill("fleet");
    await form.getByLabel(/^Instance name prefix/).fill("oxe2e");
    const region = form.getByLabel(/^Region/);
    await region.fill("eu-west-1");
    // Regions and sizes are suggested from /connector-options.
    const suggestions = await region.getAttribute("list");
    await expect.poll(() => page.locator(`datalist#${suggestions} option`).count())
      .toBeGreaterThan(5);
    await form.getByLabel(/^Instance type/).fill("t3.micro");
    await form.getByLabel(/^AMI/).fill("ami-0badbadbadbadbad0");
    await form.getByLabel(/^Min instances/).fill("1");
    await form.getByLabel(/^Max instances/).fill("1");
    await form.getByLabel(/^Tags/).fill("team=growth");
    await form.getByRole("button", { name: "Create connector" }).click();

    // The cloud refuses the image: said at its field, nothing saved.
    await expect.poll(() => fieldError(form, "config.ami_id").textContent())
      .toMatch(/^the cloud refused it: .*ami-0badbadbadbadbad0/);
    await form.getByText("Some fields need a change: see below.").waitFor();
    expect(await fieldError(form, "config.region").count()).toBe(0);
    expect((await cluster.request("GET", `/api/v1/projects/${projectId}/connectors`)).body)
      .toEqual([]);

    await form.getByLabel(/^AMI/).fill(AWS_EMULATOR_IMAGE);
    await form.getByRole("button", { name: "Create connector" }).click();
    await page.getByRole("heading", { name: "fleet" }).waitFor();
    const [connector] = (await cluster.request("GET", `/api/v1/projects/${projectId}/connectors`))
      .body;
    expect(connector).toMatchObject({
      kind: "cloud",
      provider: "aws",
      credential_id: credential.id,
      config: {
        instance_name: "oxe2e",
        region: "eu-west-1",
        instance_type: "t3.micro",
        ami_id: AWS_EMULATOR_IMAGE,
        min_proxies: 1,
        max_proxies: 1,
        tags: { team: "growth" },
      },
    });

    // The scale job makes the instance: the page shows it running at the address it booted on.
    const panel = page.getByRole("region", { name: "Instances" });
    const rows = panel.getByRole("table", { name: "Cloud instances" }).locator("tbody tr");
    await slowly(() => aws.instances().filter((i) => i.state === "running").length).toBe(1);
    const [booted] = aws.instances();
    await slowly(() => rows.locator("[data-address]").allTextContents())
      .toEqual([booted.address]);
    await slowly(() => rows.locator("[data-status]").textContent()).toBe("healthy");
    expect(await rows.locator("td").first().textContent()).toBe(booted.name);
    await slowly(() => panel.locator('[data-cloud="target"]').textContent()).toBe("1");
    await slowly(() => panel.locator('[data-cloud="hold"]').textContent()).toBe("at its target");
    expect(await panel.locator('[data-cloud="running"]').textContent()).toMatch(
      /^1 \(min 1, max 1\)/,
    );

    // An edit sends the config whole, checked with the cloud again, and keeps the instance.
    const saved = page.getByRole("form", { name: "Connector" });
    await saved.getByLabel(/^Tags/).fill("team=growth\nenv=e2e");
    await saved.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    const edited = await cluster.request(
      "GET",
      `/api/v1/projects/${projectId}/connectors/${connector.id}`,
    );
    expect(edited.body.config).toEqual({
      ...connector.config,
      tags: { team: "growth", env: "e2e" },
    });
    expect(await rows.locator("[data-address]").allTextContents()).toEqual([booted.address]);

    // The System page counts it under its cloud.
    await page.getByRole("link", { name: "System" }).click();
    const counts = page.getByRole("table", { name: "Cloud instances by status" });
    await slowly(() => counts.locator('tr[data-cloud="aws"] [data-status="healthy"]').textContent())
      .toBe("1");
    await page.goBack();
    await page.getByRole("heading", { name: "fleet" }).waitFor();

    // Deleting says the instances terminate first; the connector is pending until they have.
    const danger = page.getByRole("form", { name: "Delete connector" });
    await danger.getByText("instance is terminated first").waitFor();
    await danger.getByLabel("Connector name to confirm").fill("fleet");
    await danger.getByRole("button", { name: "Delete connector" }).click();
    await slowly(async () => {
      const gone = await page.locator("[data-connector-gone]").count();
      const pending = await page.locator("[data-pending-deletion]").count();
      return gone + pending;
    }).toBeGreaterThan(0);
    await page.locator("[data-connector-gone]").waitFor({ timeout: 60_000 });
    expect(await page.locator("[data-connector-gone]").textContent()).toContain("gone");
    expect(
      (await cluster.request("GET", `/api/v1/projects/${projectId}/connectors/${connector.id}`))
        .status,
    ).toBe(404);
    expect(aws.instances()).toEqual([]);
  });
});
