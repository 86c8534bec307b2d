/**
 * The dashboard's built files (control/web, built by Vite into dist/web), served by the api as
 * its last, catch-all route. A path reaches a file only when, decoded, it resolves to a regular
 * file inside the build, symlinks followed: a segment that decodes to `.`, `..` or holds a
 * slash, a backslash or a NUL is refused, and a file whose real path leaves the build is not
 * served. Any other GET of a page path (no file extension, outside /api/) answers the app's
 * index.html, so the app's own router takes deep links; everything else is the API's 404.
 */
import { createReadStream } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { extname, join, sep } from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { Context, Hono } from "hono";
import type { AppEnv } from "./context.ts";
import { notFoundResponse } from "./errors.ts";

/** Where `npm run build:web` writes the dashboard. */
export const WEB_BUILD_DIR = fileURLToPath(new URL("../../dist/web/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
  ".map": "application/json",
};

const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Octoprox</title></head>
<body>
<h1>Octoprox</h1>
<p>The dashboard is not built. Run <code>npm run build:web</code> (<code>npm start</code> does it
when the build is missing). The admin API is served under <code>/api/v1</code>; its description
is at <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>
</body>
</html>
`;

/**
 * The path's segments decoded, or undefined when one is refused (a traversal, an encoded
 * separator, a NUL, or percent-encoding that does not decode).
 */
export function safeSegments(rawPath: string): string[] | undefined {
  const segments: string[] = [];
  for (const raw of rawPath.split("/")) {
    if (raw === "") continue;
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (segment === "." || segment === "..") return undefined;
    if (/[/\\\0]/.test(segment)) return undefined;
    segments.push(segment);
  }
  return segments;
}

/** A regular file inside `root` (its real path), or undefined. */
async function fileInside(root: string, segments: string[]): Promise<string | undefined> {
  try {
    const real = await realpath(join(root, ...segments));
    if (real !== root && !real.startsWith(root + sep)) return undefined;
    return (await stat(real)).isFile() ? real : undefined;
  } catch {
    return undefined;
  }
}

function serveFile(c: Context<AppEnv>, path: string, size: number, immutable: boolean): Response {
  const headers = new Headers({
    "Content-Type": TYPES[extname(path)] ?? "application/octet-stream",
    "Content-Length": String(size),
    "X-Content-Type-Options": "nosniff",
    // Hashed assets never change under their name; the page itself is checked every time.
    "Cache-Control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
  });
  if (c.req.method === "HEAD") return new Response(null, { status: 200, headers });
  const body = Readable.toWeb(createReadStream(path)) as ReadableStream<Uint8Array>;
  return new Response(body, { status: 200, headers });
}

/** Mounts the catch-all; call after every other route. `dir`: the build (tests pass theirs). */
export function mountWeb(app: Hono<AppEnv>, dir: string = WEB_BUILD_DIR): void {
  let root: string | undefined;
  const resolveRoot = async () => (root ??= await realpath(dir).catch(() => undefined));
  app.on(["GET", "HEAD"], "*", async (c) => {
    const rawPath = new URL(c.req.url).pathname;
    if (rawPath === "/api" || rawPath.startsWith("/api/")) return notFoundResponse(c);
    const segments = safeSegments(rawPath);
    if (segments === undefined) return notFoundResponse(c);
    const base = await resolveRoot();
    if (base === undefined) {
      return segments.length === 0 ? c.html(NOT_BUILT_PAGE) : notFoundResponse(c);
    }
    const file = segments.length === 0 ? undefined : await fileInside(base, segments);
    if (file !== undefined) {
      const info = await stat(file);
      return serveFile(c, file, info.size, segments[0] === "assets");
    }
    // A page of the app (a deep link): its router decides. A missing file is a 404.
    const last = segments.at(-1) ?? "";
    if (extname(last) !== "") return notFoundResponse(c);
    const index = await fileInside(base, ["index.html"]);
    if (index === undefined) return c.html(NOT_BUILT_PAGE);
    return serveFile(c, index, (await stat(index)).size, false);
  });
}
