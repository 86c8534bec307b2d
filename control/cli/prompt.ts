/**
 * Questions on the terminal: a line of text, a password (not echoed), a yes/no. Prompts go to
 * stderr. Without a terminal, answers are read as lines from stdin (a password piped in).
 */
import { createInterface, type Interface } from "node:readline";
import { CliError, UsageError } from "./errors.ts";

let lines: AsyncIterator<string> | undefined;
let reader: Interface | undefined;

/** The next line of a piped stdin. */
async function nextLine(): Promise<string> {
  if (!lines) {
    reader = createInterface({ input: process.stdin, terminal: false });
    lines = reader[Symbol.asyncIterator]();
  }
  const next = await lines.next();
  if (next.done) throw new CliError("stdin ended before every answer was given");
  return next.value;
}

/** Closes a piped stdin's reader, so the process may exit. */
export function closePrompts(): void {
  reader?.close();
}

export function isInteractive(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY);
}

export function ask(question: string): Promise<string> {
  return readTyped(question, true).then((answer) => answer.trim());
}

/** A password: nothing typed is echoed. */
export function askSecret(question: string): Promise<string> {
  return readTyped(question, false);
}

/**
 * One line typed on the terminal, read with it in raw mode (readline's own echo would show a
 * password), echoing what is typed only when `echo`. Without a terminal, a line of stdin.
 */
async function readTyped(question: string, echo: boolean): Promise<string> {
  if (!process.stdin.isTTY) {
    process.stderr.write(question);
    return await nextLine();
  }
  const stdin = process.stdin;
  // Raw before the question shows: what is typed once it shows is never echoed by the tty.
  stdin.setRawMode(true);
  stdin.resume();
  process.stderr.write(question);
  try {
    return await new Promise<string>((resolve, reject) => {
      let typed = "";
      const onData = (chunk: Buffer) => {
        for (const char of chunk.toString("utf8")) {
          if (char === "\r" || char === "\n") {
            stdin.off("data", onData);
            process.stderr.write("\n");
            resolve(typed);
            return;
          }
          if (char === "\u0003" || char === "\u0004") {
            stdin.off("data", onData);
            process.stderr.write("\n");
            reject(new CliError("Cancelled"));
            return;
          }
          if (char === "\u007f" || char === "\b") {
            if (typed.length > 0 && echo) process.stderr.write("\b \b");
            typed = [...typed].slice(0, -1).join("");
          } else if (char >= " ") {
            typed += char;
            if (echo) process.stderr.write(char);
          }
        }
      };
      stdin.on("data", onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
  }
}

/**
 * Asks before something that changes or deletes: `--yes` skips the question, and without a
 * terminal to ask on the command stops (exit 2) rather than act unasked.
 */
export async function confirm(question: string, yes: boolean | undefined): Promise<boolean> {
  if (yes) return true;
  if (!isInteractive()) {
    throw new UsageError(`${question} Pass --yes to confirm without a terminal.`);
  }
  const answer = await ask(`${question} [y/N] `);
  return /^y(es)?$/i.test(answer);
}
