/**
 * `npm run docs`: writes docs/settings.md from the settings table (shared/settings.ts), the one
 * place every OCTOPROX_* variable is declared with its default and what it is for.
 * tests/docs/settings.test.ts fails when the page and the table differ, so a setting added,
 * removed or reworded there is a page rewritten here. The page is passed through `deno fmt`
 * before it is written, so it is as `npm run lint` wants it.
 */
import { execFileSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { type SettingDoc, settingDocs } from "../../shared/settings.ts";
import { DENO_BIN, DENO_ENV } from "../gateway-command.ts";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const SETTINGS_PAGE = `${ROOT}docs/settings.md`;

/** A markdown table; `deno fmt` pads its columns. */
function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (row: readonly string[]) =>
    `| ${row.map((cell) => cell.replaceAll("|", "\\|")).join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** Markdown as `deno fmt` writes it, with the checkout's settings (deno.json). */
export function formatted(markdown: string): string {
  return execFileSync(DENO_BIN, ["fmt", "--ext", "md", "-"], {
    cwd: ROOT,
    input: markdown,
    encoding: "utf8",
    env: { ...process.env, ...DENO_ENV },
  });
}

function defaultCell(doc: SettingDoc): string {
  if (doc.required) return "required";
  if (doc.defaultValue === undefined) return "unset";
  if (doc.defaultValue === "") return "none";
  return `\`${doc.defaultValue}\``;
}

function sideCell(doc: SettingDoc): string {
  return doc.sides.length === 2 ? "both" : doc.sides[0];
}

/** The whole page, as `npm run docs` writes it. */
export function renderSettingsPage(): string {
  return formatted(rawPage());
}

function rawPage(): string {
  const rows = settingDocs().map((doc) => [
    `\`${doc.name}\``,
    sideCell(doc),
    defaultCell(doc),
    doc.description,
  ]);
  return `# Settings

<!-- Written by \`npm run docs\` (scripts/docs/settings.ts) from the table in shared/settings.ts: edit the table, then run it. -->

Every process reads its settings from \`OCTOPROX_*\` environment variables, checked at start by one
schema per side (\`shared/settings.ts\`). Durations are in seconds (fractions allowed). An empty
value counts as unset. A bad or missing required value stops the process at once with one line
naming the variable, never its value (exit code 2).

The side says who reads a variable: \`control\` the control processes (\`control/main.ts\`, whatever
their role), \`gateway\` the gateways (\`gateway/main.ts\`), \`both\` every process. Where both read
one (the Redis URL and prefix, the internal secret), every process of an install must be given the
same value.

${markdownTable(["Variable", "Side", "Default", "Meaning"], rows)}

## Where health checks ask

A connector's own \`healthcheck_url\` comes first, else \`OCTOPROX_ECHO_URL\`, else the \`/echo\` of
the api at \`OCTOPROX_PUBLIC_URL\`, else the public echo \`https://httpbin.org/ip\`, which needs the
proxies to reach the internet. A loopback address in either setting is right only when every proxy
runs on the control plane's machine (the worker warns at start); \`npm start\` prints which echo is
used.

## \`npm start\` only

\`npm start\` passes every variable above to the processes it starts, and reads these of its own:

${
    markdownTable(["Variable", "Default", "Meaning"], [
      [
        "`OCTOPROX_LOCAL_POSTGRES_PORT`",
        "54329 or a free one, remembered",
        "Port of the local Postgres",
      ],
      ["`OCTOPROX_LOCAL_REDIS_PORT`", "63799 or a free one, remembered", "Port of the local Redis"],
    ])
  }

## Tests

The tests read \`OCTOPROX_TEST_DATABASE_URL\` (default \`postgres://postgres@127.0.0.1:5432/postgres\`)
and \`OCTOPROX_TEST_REDIS_URL\` (default \`redis://127.0.0.1:6379\`); the property tests read
\`OCTOPROX_FUZZ_SEED\` and \`OCTOPROX_FUZZ_RUNS\` ([testbed.md](testbed.md#property-fuzzing)).
`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  await writeFile(SETTINGS_PAGE, renderSettingsPage());
  console.log(`Wrote ${SETTINGS_PAGE}`);
}
