/**
 * Email channels, with OCTOPROX_SMTP_URL pointed at an SMTP server of the test's own: a
 * `mailto:` channel is made (and the fields an email channel cannot take are refused, each
 * named), a test delivery refused once by the server (451) is retried and taken, with its
 * subject, text and signature headers; without the setting, an email channel is a 422 on
 * body.type naming it.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AlertDeliverer } from "../../control/alerts/deliverer.ts";
import { signBody } from "../../control/alerts/signature.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../testkit/smtp-receiver.ts";
import { waitUntil } from "../../testkit/wait.ts";

let h: ApiHarness;
let smtp: SmtpReceiver;

beforeAll(async () => {
  smtp = await startSmtpReceiver(1);
  h = await startHarness({
    env: {
      OCTOPROX_SMTP_URL: smtp.url,
      OCTOPROX_SMTP_FROM: "alerts@octoprox.example",
      OCTOPROX_ALERT_RETRY_BASE_DELAY: "0.05",
    },
  });
});

afterAll(async () => {
  await h?.close();
  await smtp?.close();
});

const admin = (method: string, path: string, body?: unknown) =>
  h.request(method, path, { token: h.tokens.admin, body });

const fields = (answer: { body: { detail?: { field: string }[] } }) =>
  (answer.body.detail ?? []).map((issue) => issue.field);

describe("email channels", () => {
  test("an email channel takes one mailto: address and none of a webhook's options", async () => {
    const post = (body: Record<string, unknown>) =>
      admin("POST", "/api/v1/alerts/channels", { name: "mail", type: "email", ...body });
    expect(fields(await post({ url: "https://example.com/hook" }))).toEqual(["body.url"]);
    expect(fields(await post({ url: "mailto:a@example.com,b@example.com" }))).toEqual([
      "body.url",
    ]);
    expect(fields(await post({ url: "mailto:ops@example.com", format: "slack" }))).toEqual([
      "body.format",
    ]);
    expect(
      fields(await post({ url: "mailto:ops@example.com", allow_private_address: true })),
    ).toEqual(["body.allow_private_address"]);
    const webhook = await admin("POST", "/api/v1/alerts/channels", {
      name: "hook",
      url: "mailto:ops@example.com",
    });
    expect(fields(webhook)).toEqual(["body.url"]);
  });

  test("a test delivery is refused once by the server, retried, and taken, signed", async () => {
    const made = await admin("POST", "/api/v1/alerts/channels", {
      name: "ops mail",
      type: "email",
      url: "mailto:ops@example.com",
    });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ type: "email", url: "mailto:ops@example.com" });
    const owed = await admin("POST", `/api/v1/alerts/channels/${made.body.id}/test`);
    const loop = new AlertDeliverer({
      database: h.deps.database,
      settings: h.deps.settings,
      logger: h.deps.logger,
      pollMs: 50,
    });
    await loop.deliverDue();
    await waitUntil(async () => (await loop.deliverDue()) > 0, { message: "the retry due" });
    expect(smtp.received).toHaveLength(1);
    const [mail] = smtp.received;
    expect(mail.from).toBe("alerts@octoprox.example");
    expect(mail.to).toEqual(["ops@example.com"]);
    expect(mail.headers.subject).toContain("[TEST]");
    expect(mail.text).toContain("A test delivery to channel ops mail");
    const [row] = await h.deps.database.sql<{ payload: string }[]>`
      select payload::text from alert_deliveries where id = ${owed.body.id}`;
    const timestamp = Number(mail.headers["x-octoprox-timestamp"]);
    expect(mail.headers["x-octoprox-signature"]).toBe(
      signBody(made.body.secret, timestamp, JSON.stringify(JSON.parse(row.payload))),
    );
    const log = await admin("GET", "/api/v1/alerts/deliveries");
    const mine = log.body.find((d: { id: number }) => d.id === owed.body.id);
    expect(mine).toMatchObject({ state: "delivered", attempts: 2 });
    expect(mine.tries.map((t: { status_code: number | null }) => t.status_code)).toEqual([
      451,
      250,
    ]);
    expect(mine.tries[0].error).toContain("451");
  });
});

describe("without OCTOPROX_SMTP_URL", () => {
  test("an email channel is a 422 on body.type naming the setting", async () => {
    const bare = await startHarness();
    try {
      const answer = await bare.request("POST", "/api/v1/alerts/channels", {
        token: bare.tokens.admin,
        body: { name: "mail", type: "email", url: "mailto:ops@example.com" },
      });
      expect(answer.status).toBe(422);
      expect(fields(answer)).toEqual(["body.type"]);
      expect(answer.text).toContain("OCTOPROX_SMTP_URL");
    } finally {
      await bare.close();
    }
  });
});
