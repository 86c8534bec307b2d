/**
 * A dashboard build of the tests' own, served by the api harness on a real socket: an index
 * page and one hashed asset inside the build; beside it, outside, a secret file (and a sibling
 * folder whose name starts like the build's); inside, a link to that file and one to the folder
 * holding them. Tests of what the api serves read the secret's text to show nothing leaked.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";

export const SECRET = "outside-the-build-secret";
export const INDEX = '<!doctype html><div id="app"></div>';
export const ASSET = "/assets/app-1234.js";

export interface ServedBuild {
  h: ApiHarness;
  port: number;
  close(): Promise<void>;
}

export async function serveWebBuild(): Promise<ServedBuild> {
  const dir = await mkdtemp(join(tmpdir(), "ox-web-"));
  const build = join(dir, "build");
  await mkdir(join(build, "assets"), { recursive: true });
  await writeFile(join(build, "index.html"), INDEX);
  await writeFile(join(build, ...ASSET.split("/")), "console.log('app');");
  await writeFile(join(dir, "secret.txt"), SECRET);
  await mkdir(join(dir, "build-sibling"));
  await writeFile(join(dir, "build-sibling", "secret.txt"), SECRET);
  await symlink(join(dir, "secret.txt"), join(build, "assets", "leak.txt"));
  await symlink(dir, join(build, "outside"));
  // No users: the files are public, and making users (hashing their passwords) is slow.
  const h = await startHarness({ webDir: build, noUsers: true });
  const server = await listen(h.app);
  return {
    h,
    port: server.port,
    async close() {
      await server.close();
      await h.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
