/**
 * Cloud credentials and connectors through the api, against the three clouds' emulators: each
 * body checked by its cloud's schema (422 naming the field), secrets answered masked, the
 * credential and the connector each checked against the cloud before it is saved (the cloud's
 * refusal at the field it names, a cloud that does not answer a 502), a credential change
 * checked on its own and against each connector using it, and nothing stored when refused.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { CLOUDS, startTestClouds, type TestClouds } from "../../testkit/clouds.ts";
import { freePort } from "../../testkit/ports.ts";

let clouds: TestClouds;
let h: ApiHarness;
let projectId: string;

beforeAll(async () => {
  clouds = await startTestClouds();
  h = await startHarness({
    env: { ...clouds.env, OCTOPROX_CLOUD_PROXY_PORT: String(await freePort()) },
  });
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Clouds", username: "clouds" },
  });
  projectId = project.body.id;
});

afterAll(async () => {
  await h?.close();
  await clouds?.close();
});

const credentials = () => `/api/v1/projects/${projectId}/credentials`;
const connectors = () => `/api/v1/projects/${projectId}/connectors`;

async function stored(table: "credentials" | "connectors"): Promise<string[]> {
  const rows = await h.deps.database.sql<{ name: string }[]>`
    select name from ${h.deps.database.sql(table)} where project_id = ${projectId}`;
  return rows.map((row) => row.name).sort();
}

async function credential(provider: string, name = provider): Promise<string> {
  const answer = await h.request("POST", credentials(), {
    token: h.tokens.editor,
    body: { name, provider, config: clouds.clouds[provider as "aws"].credential },
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id;
}

describe("cloud credentials", () => {
  test("each cloud's fields are checked, 422 naming the field, and nothing is stored", async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["aws", { access_key: "not a key", secret_key: "s" }, "body.config.access_key"],
      ["aws", { access_key: "AKIAOCTOPROXTEST0001" }, "body.config.secret_key"],
      [
        "gcp",
        { service_account_json: "{}", project_id: "octoprox-test" },
        "body.config.service_account_json",
      ],
      [
        "gcp",
        { service_account_json: "not json", project_id: "octoprox-test" },
        "body.config.service_account_json",
      ],
      [
        "azure",
        { subscription_id: "x", tenant_id: "x", client_id: "x", client_secret: "s" },
        "body.config.subscription_id",
      ],
      [
        "aws",
        { access_key: "AKIAOCTOPROXTEST0001", secret_key: "s", region: "x" },
        "body.config.region",
      ],
    ];
    for (const [provider, config, field] of cases) {
      const answer = await h.request("POST", credentials(), {
        token: h.tokens.editor,
        body: { name: `bad-${provider}`, provider, config },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(422);
      expect(answer.body.detail.map((issue: { field: string }) => issue.field)).toContain(field);
    }
    expect(await stored("credentials")).toEqual([]);
  });

  test("secrets are answered masked", async () => {
    const ids = await Promise.all(
      CLOUDS.map((provider) => credential(provider, `masked-${provider}`)),
    );
    const answers = await Promise.all(
      ids.map((id) => h.request("GET", `${credentials()}/${id}`, { token: h.tokens.viewer })),
    );
    expect(answers[0].body.config).toMatchObject({
      access_key: "AKIAOCTOPROXTEST0001",
      secret_key: "********",
    });
    expect(answers[1].body.config).toMatchObject({
      service_account_json: "********",
      project_id: "octoprox-test",
    });
    expect(answers[2].body.config).toMatchObject({ client_secret: "********" });
    for (const answer of answers) {
      expect(answer.text).not.toMatch(/PRIVATE KEY|secret-key|client-secret/);
    }
  });
});

describe("cloud credentials checked with their cloud", () => {
  test.each(CLOUDS)(
    "%s: a credential the cloud refuses is a 422 at its field, and nothing is stored",
    async (provider) => {
      const cloud = clouds.clouds[provider];
      const key = JSON.parse(clouds.clouds.gcp.credential.service_account_json as string);
      const wrong: Record<string, [Record<string, unknown>, string][]> = {
        aws: [
          [{ secret_key: "not-the-secret" }, "secret_key"],
          [{ access_key: "AKIAUNKNOWNKEY000001" }, "access_key"],
        ],
        gcp: [
          [
            {
              service_account_json: JSON.stringify({
                ...key,
                client_email: "nobody@octoprox-test.iam.gserviceaccount.com",
              }),
            },
            "service_account_json",
          ],
          [{ project_id: "someone-else" }, "project_id"],
        ],
        azure: [
          [{ client_secret: "not-the-secret" }, "client_secret"],
          [{ tenant_id: "1d9f5e3b-6c2a-4da4-9f8b-2a3b4c5d6e7f" }, "tenant_id"],
          [{ client_id: "b4c6d8e0-2f3a-4b7c-9d1e-0f9a8b7c6d5e" }, "client_id"],
          [{ subscription_id: "7e2d3b5f-1c8a-4f60-8b4d-3e9f6a8c0d21" }, "subscription_id"],
        ],
      };
      for (const [changes, field] of wrong[provider]) {
        const answer = await h.request("POST", credentials(), {
          token: h.tokens.editor,
          body: {
            name: `refused-${provider}`,
            provider,
            config: { ...cloud.credential, ...changes },
          },
        });
        expect(answer.status, JSON.stringify(answer.body)).toBe(422);
        expect(answer.body.detail).toHaveLength(1);
        expect(answer.body.detail[0].field).toBe(`body.config.${field}`);
        expect(answer.body.detail[0].message).toMatch(/^the cloud refused the credential: /);
        expect(answer.text).not.toMatch(/not-the-secret|PRIVATE KEY/);
      }
      expect(await stored("credentials")).not.toContain(`refused-${provider}`);
    },
  );

  test("a cloud that does not answer is a 502, and nothing is stored", async () => {
    const settings = h.deps.settings.cloud as { awsEndpoint: string | undefined };
    const endpoint = settings.awsEndpoint;
    settings.awsEndpoint = `https://127.0.0.1:${await freePort()}`;
    try {
      const answer = await h.request("POST", credentials(), {
        token: h.tokens.editor,
        body: { name: "unanswered-aws", provider: "aws", config: clouds.clouds.aws.credential },
      });
      expect(answer.status).toBe(502);
      expect(answer.body.error).toMatch(/^The cloud did not answer the check: aws DescribeRegions/);
    } finally {
      settings.awsEndpoint = endpoint;
    }
    expect(await stored("credentials")).not.toContain("unanswered-aws");
  });
});

describe("cloud connectors", () => {
  test("a config is checked by its cloud's schema, each issue at its field", async () => {
    const aws = await credential("aws", "schema-aws");
    const answer = await h.request("POST", connectors(), {
      token: h.tokens.editor,
      body: {
        name: "bad",
        kind: "cloud",
        provider: "aws",
        credential_id: aws,
        config: {
          instance_name: "Not Valid",
          region: "mars",
          instance_type: "t3.micro",
          ami_id: "ami-1",
          min_proxies: 5,
          max_proxies: 2,
          tags: { "octoprox-connector": "mine" },
          zone: "europe-west1-b",
        },
      },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail.map((issue: { field: string }) => issue.field).sort()).toEqual([
      "body.config.zone",
      "body.config.ami_id",
      "body.config.instance_name",
      "body.config.region",
      "body.config.tags.octoprox-connector",
    ].sort());
    const ranges = await h.request("POST", connectors(), {
      token: h.tokens.editor,
      body: {
        name: "bad",
        kind: "cloud",
        provider: "aws",
        credential_id: aws,
        config: clouds.clouds.aws.connectorConfig({
          min_proxies: 5,
          max_proxies: 2,
          min_rotation_period_minutes: 90,
          max_rotation_period_minutes: 60,
        }),
      },
    });
    expect(ranges.status).toBe(422);
    expect(ranges.body.detail).toEqual([
      { field: "body.config.max_proxies", message: "must not be less than min_proxies" },
      {
        field: "body.config.max_rotation_period_minutes",
        message: "must not be less than min_rotation_period_minutes",
      },
    ]);
    const noCredential = await h.request("POST", connectors(), {
      token: h.tokens.editor,
      body: {
        name: "bad",
        kind: "cloud",
        provider: "gcp",
        config: clouds.clouds.gcp.connectorConfig(),
      },
    });
    expect(noCredential.status).toBe(422);
    expect(noCredential.body.detail[0].field).toBe("body.credential_id");
    const otherCloud = await h.request("POST", connectors(), {
      token: h.tokens.editor,
      body: {
        name: "bad",
        kind: "cloud",
        provider: "gcp",
        credential_id: aws,
        config: clouds.clouds.gcp.connectorConfig(),
      },
    });
    expect(otherCloud.status).toBe(422);
    expect(otherCloud.body.detail).toEqual([{
      field: "body.credential_id",
      message: "the credential is for aws, not gcp",
    }]);
    expect(await stored("connectors")).toEqual([]);
  });

  test.each(CLOUDS)(
    "%s: the cloud's refusal is shown at the field it names, and nothing is stored",
    async (provider) => {
      const cloud = clouds.clouds[provider];
      const id = await credential(provider, `refusal-${provider}`);
      const unknown: Record<string, [string, string]> = {
        aws: ["ami_id", "ami-0fffffffffffffff0"],
        gcp: ["machine_type", "n9-nonexistent-1"],
        azure: ["vm_size", "Standard_Nope"],
      };
      const [field, value] = unknown[provider];
      const answer = await h.request("POST", connectors(), {
        token: h.tokens.editor,
        body: {
          name: `refused-${provider}`,
          kind: "cloud",
          provider,
          credential_id: id,
          config: cloud.connectorConfig({ [field]: value }),
        },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(422);
      expect(answer.body.detail).toHaveLength(1);
      expect(answer.body.detail[0].field).toBe(`body.config.${field}`);
      expect(answer.body.detail[0].message).toMatch(/^the cloud refused it: /);
      expect(await stored("connectors")).not.toContain(`refused-${provider}`);

      // A credential the cloud takes, refused where the connector places its instances: an
      // opt-in region the account has not enabled, a project or a subscription it cannot use.
      // The refusal is the credential's, shown at the connector's credential_id.
      const elsewhere: Record<string, Record<string, unknown>> = {
        aws: { region: "ap-east-1" },
        gcp: { project_id: "someone-else" },
        azure: { subscription_id: "7e2d3b5f-1c8a-4f60-8b4d-3e9f6a8c0d21" },
      };
      const refused = await h.request("POST", connectors(), {
        token: h.tokens.editor,
        body: {
          name: `elsewhere-${provider}`,
          kind: "cloud",
          provider,
          credential_id: id,
          config: cloud.connectorConfig(elsewhere[provider]),
        },
      });
      expect(refused.status, JSON.stringify(refused.body)).toBe(422);
      expect(refused.body.detail[0].field).toBe("body.credential_id");
      expect(refused.body.detail[0].message).toMatch(/^the cloud refused the credential: /);
      expect(await stored("connectors")).not.toContain(`elsewhere-${provider}`);
    },
  );

  test("a connector the cloud takes is saved with its defaults; a credential change the cloud refuses is refused at its field and changes nothing", async () => {
    const id = await credential("aws", "saved-aws");
    const created = await h.request("POST", connectors(), {
      token: h.tokens.editor,
      body: {
        name: "fleet",
        kind: "cloud",
        provider: "aws",
        credential_id: id,
        config: clouds.clouds.aws.connectorConfig(),
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.config).toMatchObject({
      min_proxies: 1,
      max_proxies: 10,
      min_rotation_period_minutes: 60,
      max_rotation_period_minutes: 1440,
      tags: {},
      security_group: null,
    });
    const change = await h.request("PATCH", `${credentials()}/${id}`, {
      token: h.tokens.editor,
      body: { config: { secret_key: "a-secret-the-cloud-refuses" } },
    });
    expect(change.status, JSON.stringify(change.body)).toBe(422);
    expect(change.body.detail[0].field).toBe("body.config.secret_key");
    const [row] = await h.deps.database.sql<{ config: { secret_key: string } }[]>`
      select config from credentials where id = ${id}`;
    expect(row.config.secret_key).toBe(clouds.clouds.aws.credential.secret_key);
    // A cloud that does not answer: 502, and nothing changes.
    const settings = h.deps.settings.cloud as { awsEndpoint: string | undefined };
    const endpoint = settings.awsEndpoint;
    settings.awsEndpoint = `https://127.0.0.1:${await freePort()}`;
    try {
      const unreachable = await h.request("PATCH", `${connectors()}/${created.body.id}`, {
        token: h.tokens.editor,
        body: { config: clouds.clouds.aws.connectorConfig({ instance_type: "t3.small" }) },
      });
      expect(unreachable.status).toBe(502);
      expect(unreachable.body.error).toMatch(/^The cloud did not answer the check: aws /);
    } finally {
      settings.awsEndpoint = endpoint;
    }
    const after = await h.request("GET", `${connectors()}/${created.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(after.body.config.instance_type).toBe("t3.micro");
  });

  test("the form's options, and instances only of a cloud connector", async () => {
    const options = await h.request("GET", "/api/v1/connector-options", { token: h.tokens.viewer });
    expect(options.status).toBe(200);
    expect(options.body.aws_regions).toContain("eu-west-1");
    expect(options.body.gcp_zones).toContain("europe-west1-b");
    expect(options.body.azure_vm_sizes).toContain("Standard_B1s");
    expect(options.body.countries).toContain("DE");
    const fixed = await h.request("POST", connectors(), {
      token: h.tokens.editor,
      body: { name: "static", kind: "static" },
    });
    const instances = await h.request("GET", `${connectors()}/${fixed.body.id}/instances`, {
      token: h.tokens.viewer,
    });
    expect(instances.status).toBe(400);
    expect(instances.body.error).toBe("Only a cloud connector has instances");
  });
});
