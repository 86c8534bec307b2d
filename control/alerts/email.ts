/**
 * One try of an email channel's delivery: the stored payload as a message (subject and text,
 * the JSON beneath), through OCTOPROX_SMTP_URL, with the same signature headers a webhook gets
 * (over the JSON text). The SMTP server's reply code is the try's status; nothing of the SMTP
 * URL (it holds the login) reaches an error or a log.
 */
import nodemailer, { type Transporter } from "nodemailer";
import { errorText } from "../../shared/errors.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { mailAddressOf } from "../model/alerts.ts";
import type { ClaimedDelivery } from "./deliveries.ts";
import { emailOf } from "./payload.ts";
import { DELIVERY_HEADER, SIGNATURE_HEADER, signBody, TIMESTAMP_HEADER } from "./signature.ts";

/** One transport per SMTP URL, kept for the process (it pools no connection between sends). */
const transports = new Map<string, Transporter>();

function transportOf(smtpUrl: string, timeoutMs: number): Transporter {
  let transport = transports.get(smtpUrl);
  if (transport === undefined) {
    // nodemailer reads a URL's query as transport options: the deadlines ride there.
    const url = new URL(smtpUrl);
    for (const option of ["connectionTimeout", "greetingTimeout", "socketTimeout"]) {
      url.searchParams.set(option, String(timeoutMs));
    }
    transport = nodemailer.createTransport(url.href);
    transports.set(smtpUrl, transport);
  }
  return transport;
}

/** The reply code at the head of an SMTP reply (`250 2.0.0 Ok`), or null. */
function replyCode(text: unknown): number | null {
  const match = /^(\d{3})/.exec(String(text ?? ""));
  return match ? Number(match[1]) : null;
}

export async function sendEmail(
  settings: Pick<ControlSettings, "smtpUrl" | "smtpFrom">,
  delivery: ClaimedDelivery,
  secret: string,
  timeoutMs: number,
): Promise<{ statusCode: number | null; error: string | null }> {
  const to = mailAddressOf(delivery.url);
  if (settings.smtpUrl === undefined) {
    return { statusCode: null, error: "OCTOPROX_SMTP_URL is not set on this api process" };
  }
  if (to === undefined) return { statusCode: null, error: "the channel's URL holds no address" };
  const body = JSON.stringify(delivery.payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const { subject, text } = emailOf(delivery.payload);
  try {
    const info = await transportOf(settings.smtpUrl, timeoutMs).sendMail({
      from: settings.smtpFrom,
      to,
      subject,
      text,
      headers: {
        [TIMESTAMP_HEADER]: String(timestamp),
        [SIGNATURE_HEADER]: signBody(secret, timestamp, body),
        [DELIVERY_HEADER]: String(delivery.id),
      },
    });
    return { statusCode: replyCode(info.response), error: null };
  } catch (error) {
    const code = (error as { responseCode?: unknown }).responseCode;
    // The SMTP URL (and its password) is the transport's, never in the error's message; strip
    // it anyway should a library ever say it.
    const text = errorText(error).replaceAll(settings.smtpUrl, "OCTOPROX_SMTP_URL");
    return { statusCode: typeof code === "number" ? code : null, error: text };
  }
}
