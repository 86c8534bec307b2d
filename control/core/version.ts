/** The release this process runs, read once from package.json. */
import { readFileSync } from "node:fs";

function readVersion(): string {
  try {
    const text = readFileSync(new URL("../../package.json", import.meta.url), "utf8");
    const version = (JSON.parse(text) as { version?: unknown }).version;
    return typeof version === "string" ? version : "unknown";
  } catch {
    return "unknown";
  }
}

export const VERSION: string = readVersion();
