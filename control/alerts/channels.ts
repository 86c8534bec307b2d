/**
 * Alert channels: where deliveries go. A webhook's URL is put through the egress guard when it
 * is saved (a private, loopback or metadata address refused unless the admin gave the channel
 * `allow_private_address`) and again at every delivery. An email channel (`mailto:address`)
 * needs OCTOPROX_SMTP_URL on the install. The signing secret is made here, shown once in the
 * create answer, and kept sealed (channel-secret.ts).
 */
import { asc, eq } from "drizzle-orm";
import { alertChannels } from "../../db/schema.ts";
import { EgressRefusedError, NotFoundError, ValidationError } from "../../shared/errors.ts";
import { type AlertChannelFormat, type AlertChannelType, checkChannel } from "../model/alerts.ts";
import { isUuid, read, type ServiceDeps, write } from "../core/store.ts";
import { vetTarget } from "../egress/guard.ts";
import { sealChannelSecret } from "./channel-secret.ts";
import { newChannelSecret } from "./signature.ts";

export type ChannelRow = typeof alertChannels.$inferSelect;

type Deps = Pick<ServiceDeps, "database" | "changes" | "settings">;

export interface NewChannel {
  name: string;
  type: AlertChannelType;
  format: AlertChannelFormat;
  url?: string;
  allow_private_address: boolean;
}

export interface ChannelEdit {
  name?: string;
  format?: AlertChannelFormat;
  url?: string;
  allow_private_address?: boolean;
}

/** Refuses a webhook URL the guard would refuse, as a 422 on body.url. */
async function vetUrl(deps: Deps, url: string, allowPrivate: boolean): Promise<void> {
  if (new URL(url).protocol === "mailto:") return;
  try {
    await vetTarget(url, {
      allowHttp: true,
      allowPrivate,
      allowLoopback: deps.settings.egressAllowLoopback,
    });
  } catch (error) {
    if (!(error instanceof EgressRefusedError)) throw error;
    const hint = allowPrivate ? "" : " (set allow_private_address to deliver to your own network)";
    throw new ValidationError([{ field: "body.url", message: `${error.message}${hint}` }], {
      cause: error,
    });
  }
}

export async function createChannel(
  deps: Deps,
  input: NewChannel,
): Promise<{ row: ChannelRow; secret: string }> {
  if (input.type === "email" && deps.settings.smtpUrl === undefined) {
    throw new ValidationError([{
      field: "body.type",
      message: "email channels need OCTOPROX_SMTP_URL, which this install does not set",
    }]);
  }
  if (input.url === undefined) {
    throw new ValidationError([{ field: "body.url", message: "is required" }]);
  }
  checkChannel({ ...input, url: input.url });
  await vetUrl(deps, input.url, input.allow_private_address);
  const id = crypto.randomUUID();
  const secret = newChannelSecret();
  const row = await write(deps, async (tx) => {
    const [inserted] = await tx.insert(alertChannels).values({
      id,
      name: input.name,
      type: input.type,
      format: input.format,
      url: input.url!,
      allowPrivateAddress: input.allow_private_address,
      secretSealed: sealChannelSecret(deps.settings.internalSecret, id, secret),
    }).returning();
    return { result: inserted, change: null };
  });
  return { row, secret };
}

export function listChannels(deps: Pick<ServiceDeps, "database">): Promise<ChannelRow[]> {
  return read(deps, (db) => db.select().from(alertChannels).orderBy(asc(alertChannels.createdAt)));
}

export async function getChannel(
  deps: Pick<ServiceDeps, "database">,
  id: string,
): Promise<ChannelRow> {
  if (!isUuid(id)) throw new NotFoundError("Alert channel");
  const [row] = await read(
    deps,
    (db) => db.select().from(alertChannels).where(eq(alertChannels.id, id)),
  );
  if (!row) throw new NotFoundError("Alert channel");
  return row;
}

export async function updateChannel(deps: Deps, id: string, edit: ChannelEdit) {
  const before = await getChannel(deps, id);
  const url = edit.url ?? before.url;
  const allowPrivate = edit.allow_private_address ?? before.allowPrivateAddress;
  checkChannel({
    type: before.type as AlertChannelType,
    format: (edit.format ?? before.format) as AlertChannelFormat,
    url,
    allow_private_address: allowPrivate,
  });
  if (edit.url !== undefined || edit.allow_private_address !== undefined) {
    await vetUrl(deps, url, allowPrivate);
  }
  return await write(deps, async (tx) => {
    const [row] = await tx.update(alertChannels).set({
      name: edit.name ?? before.name,
      format: edit.format ?? before.format,
      url,
      allowPrivateAddress: allowPrivate,
      updatedAt: new Date(),
    }).where(eq(alertChannels.id, id)).returning();
    if (!row) throw new NotFoundError("Alert channel");
    return { result: row, change: null };
  });
}

/** Deletes a channel with its deliveries; rules that named it deliver to their others. */
export async function deleteChannel(deps: Deps, id: string): Promise<void> {
  if (!isUuid(id)) throw new NotFoundError("Alert channel");
  await write(deps, async (tx) => {
    const gone = await tx.delete(alertChannels).where(eq(alertChannels.id, id))
      .returning({ id: alertChannels.id });
    if (gone.length === 0) throw new NotFoundError("Alert channel");
    return { result: undefined, change: null };
  });
}
