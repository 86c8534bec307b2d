/**
 * The api's internal endpoint for gateways: `GET /internal/geo/files/{sha256}` answers an IP
 * database file by its checksum, the one the feed's global section lists it under (the shipped
 * database under its own). Only a gateway may ask: `Authorization: Bearer <gateway token>`, the
 * token every process derives from OCTOPROX_INTERNAL_SECRET (shared/feed/codec.ts), compared in
 * constant time. Not in the OpenAPI document: no person or script calls it.
 */
import { timingSafeEqual } from "node:crypto";
import { eq } from "drizzle-orm";
import { Hono } from "hono";
import { geoFiles } from "../../db/schema.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { UnauthorizedError } from "../../shared/errors.ts";
import { read } from "../core/store.ts";
import { shippedBytes, shippedFile } from "../geo/shipped.ts";
import type { ApiDeps } from "./deps.ts";
import type { AppEnv } from "./context.ts";

export const INTERNAL_GEO_FILES = "/internal/geo/files";

const CHECKSUM = /^[0-9a-f]{64}$/;
const BEARER = /^Bearer\s+(\S+)\s*$/i;

export function internalGeoRoutes(deps: Pick<ApiDeps, "settings" | "database">): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  let token: Promise<Uint8Array> | undefined;
  const expected = () =>
    token ??= deriveFeedKeys(deps.settings.internalSecret).then((keys) =>
      new TextEncoder().encode(keys.gatewayTokenHex)
    );

  app.get(`${INTERNAL_GEO_FILES}/:checksum`, async (c) => {
    const presented = BEARER.exec(c.req.header("authorization") ?? "")?.[1];
    const wanted = await expected();
    const given = new TextEncoder().encode(presented ?? "");
    if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) {
      c.header("WWW-Authenticate", "Bearer");
      throw new UnauthorizedError("The internal endpoint takes a gateway's token only");
    }
    const checksum = c.req.param("checksum").toLowerCase();
    if (!CHECKSUM.test(checksum)) return c.json({ error: "No such file" }, 404);
    const shipped = await shippedFile();
    let bytes: Uint8Array | undefined;
    if (checksum === shipped.checksum) bytes = await shippedBytes();
    else {
      const [row] = await read(
        deps,
        (db) =>
          db.select({ bytes: geoFiles.bytes }).from(geoFiles).where(
            eq(geoFiles.checksum, checksum),
          ),
      );
      bytes = row?.bytes;
    }
    // Gone: replaced and deleted since the feed that listed it; the next feed lists another.
    if (bytes === undefined) return c.json({ error: "No such file" }, 404);
    return c.body(bytes as Uint8Array<ArrayBuffer>, 200, {
      "content-type": "application/octet-stream",
      "content-length": String(bytes.byteLength),
      // Named by content: the same name is always the same bytes.
      "cache-control": "private, max-age=31536000, immutable",
    });
  });
  return app;
}
