/**
 * Properties of the configuration document (control/config/): what `octoprox apply -f` and the
 * api's config routes read. Any document is checked to its model or to issues each naming a
 * field with a message, never a throw; any file text (YAML or JSON, mutated) reads as a document
 * or as issues; and a document's file, as formatConfigFile writes it, reads back as the same
 * document.
 */
import fc from "fast-check";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigDocumentSchema } from "../../control/config/document.ts";
import { checkConfig, formatConfigFile, parseConfigFile } from "../../control/config/file.ts";
import { check, mutatedText } from "./runs.ts";
import { valueFor } from "./valibot-arbitrary.ts";

const document = valueFor(ConfigDocumentSchema);

// References (`${NAME}`, `file:`) resolve in an empty environment and an empty directory.
const options = { env: {}, baseDir: mkdtempSync(join(tmpdir(), "octoprox-fuzz-config-")) };

describe("configuration documents (property)", () => {
  it("any document: its model, or issues that each name a field with a message", () => {
    check(
      fc.property(document, (input) => {
        const checked = checkConfig(input, "config");
        if (checked.ok) return;
        expect(checked.issues.length).toBeGreaterThan(0);
        for (const issue of checked.issues) {
          expect(issue.field === "config" || issue.field.startsWith("config.")).toBe(true);
          expect(issue.message.length).toBeGreaterThan(4);
        }
      }),
      0.5,
    );
  });

  it("any file text: a document, or issues with a message", () => {
    const text = fc.tuple(document, fc.constantFrom("yaml" as const, "json" as const)).map((
      [input, format],
    ) => formatConfigFile(input as never, format));
    check(
      fc.property(mutatedText(text), (file) => {
        const read = parseConfigFile(file, options);
        if (!read.ok) {
          for (const issue of read.issues) expect(issue.message.length).toBeGreaterThan(4);
        }
      }),
      0.5,
    );
  });

  it("a valid document's file reads back as the same document", () => {
    check(
      fc.property(document, fc.constantFrom("yaml" as const, "json" as const), (input, format) => {
        const checked = checkConfig(input, "");
        fc.pre(checked.ok);
        const read = parseConfigFile(formatConfigFile(input as never, format), options);
        expect(read.ok && read.config).toEqual(checked.ok && checked.config);
      }),
      0.5,
    );
  });
});

describe("configuration file regressions", () => {
  it("an alias to no anchor is an issue with its message, not a thrown ReferenceError", () => {
    // Found by the file property: the YAML read threw out of parseConfigFile.
    expect(parseConfigFile("version: 1\nrevision: *nowhere\nprojects: []\n", options)).toEqual({
      ok: false,
      issues: [{
        field: "",
        message: "Unresolved alias (the anchor must be set before the alias): nowhere",
      }],
    });
  });

  it("aliases past the parser's bound are an issue too", () => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let level = 1; level < 8; level++) {
      const previous = String.fromCharCode(96 + level);
      const name = String.fromCharCode(97 + level);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${previous}`).join(", ")}]`);
    }
    const read = parseConfigFile(`${lines.join("\n")}\n`, options);
    expect(read.ok).toBe(false);
    expect(read.ok ? "" : read.issues[0].message).toMatch(/alias/i);
  });
});
