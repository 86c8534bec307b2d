/**
 * One try of a delivery (an email channel's goes through email.ts): the stored payload as JSON,
 * signed with the channel's secret, POSTed
 * through the egress guard (plain HTTP admitted; private addresses only with the channel's
 * leave). Any 2xx delivers it. What the log keeps of a failure names the host, never the URL's
 * path or query (a Slack-style URL carries its token there) and never the secret.
 */
import { errorText } from "../../shared/errors.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { egressRequest } from "../egress/guard.ts";
import { openChannelSecret } from "./channel-secret.ts";
import type { ClaimedDelivery } from "./deliveries.ts";
import { sendEmail } from "./email.ts";
import { DELIVERY_HEADER, SIGNATURE_HEADER, signBody, TIMESTAMP_HEADER } from "./signature.ts";

/** A receiver answers within this, or the try failed. */
export const SEND_TIMEOUT_MS = 10_000;
/** What is read of an answer: its status matters, its body not. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface SendResult {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** Strips the URL's path and query from an error's text. */
function scrubbed(text: string, url: string): string {
  try {
    const parsed = new URL(url);
    const shown = `${parsed.host}${parsed.pathname}`;
    return text.replaceAll(url, parsed.host).replaceAll(shown, parsed.host);
  } catch {
    return text;
  }
}

export async function sendDelivery(
  settings: Pick<
    ControlSettings,
    "internalSecret" | "egressAllowLoopback" | "smtpUrl" | "smtpFrom"
  >,
  delivery: ClaimedDelivery,
  signal?: AbortSignal,
): Promise<SendResult> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  let secret: string;
  try {
    secret = openChannelSecret(
      settings.internalSecret,
      delivery.channel_id,
      delivery.secret_sealed,
    );
  } catch (error) {
    return { statusCode: null, error: errorText(error), durationMs: took() };
  }
  if (delivery.type === "email") {
    return { ...await sendEmail(settings, delivery, secret, SEND_TIMEOUT_MS), durationMs: took() };
  }
  const body = JSON.stringify(delivery.payload);
  const timestamp = Math.floor(Date.now() / 1000);
  try {
    const answer = await egressRequest(delivery.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        [TIMESTAMP_HEADER]: String(timestamp),
        [SIGNATURE_HEADER]: signBody(secret, timestamp, body),
        [DELIVERY_HEADER]: String(delivery.id),
      },
      body,
      timeoutMs: SEND_TIMEOUT_MS,
      maxBytes: MAX_ANSWER_BYTES,
      allowHttp: true,
      allowPrivate: delivery.allow_private_address,
      allowLoopback: settings.egressAllowLoopback,
      signal,
    });
    const ok = answer.status >= 200 && answer.status < 300;
    return {
      statusCode: answer.status,
      error: ok ? null : `answered ${answer.status}`,
      durationMs: took(),
    };
  } catch (error) {
    return {
      statusCode: null,
      error: scrubbed(errorText(error), delivery.url),
      durationMs: took(),
    };
  }
}
