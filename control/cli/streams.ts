/**
 * Request bodies streamed from disk with a byte count (a proxy list, a backup), and answers
 * streamed to disk: a 100,000-line list or a large backup never sits whole in memory.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { CliError } from "./errors.ts";

/** A piece of a streamed body: bytes as they are, or a file's contents. */
export type BodyPart = { bytes: Uint8Array } | { file: string };

/** The total size of the parts, in bytes; a missing file is an error naming it. */
export async function sizeOf(parts: readonly BodyPart[]): Promise<number> {
  let total = 0;
  for (const part of parts) {
    if ("bytes" in part) total += part.bytes.byteLength;
    else total += (await statFile(part.file)).size;
  }
  return total;
}

export async function statFile(path: string) {
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new CliError(`${path} is not a file`);
    return info;
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`Cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`, {
      cause: error,
    });
  }
}

/** The parts one after another, calling `onBytes` with the running total as each is read. */
export function streamParts(
  parts: readonly BodyPart[],
  onBytes: (totalBytes: number) => void,
): ReadableStream<Uint8Array> {
  let index = 0;
  let sent = 0;
  let current: AsyncIterator<Buffer> | undefined;
  let file: ReturnType<typeof createReadStream> | undefined;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      while (index < parts.length) {
        const part = parts[index];
        if ("bytes" in part) {
          index++;
          sent += part.bytes.byteLength;
          onBytes(sent);
          controller.enqueue(part.bytes);
          return;
        }
        if (!current) {
          file = createReadStream(part.file, { highWaterMark: 256 * 1024 });
          current = file[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
        }
        const next = await current.next();
        if (next.done) {
          current = undefined;
          index++;
          continue;
        }
        sent += next.value.byteLength;
        onBytes(sent);
        controller.enqueue(new Uint8Array(next.value));
        return;
      }
      controller.close();
    },
    cancel() {
      file?.destroy();
    },
  });
}

/** Writes an answer's body to `path` (mode 0600: a backup is secret), counting its bytes. */
export async function saveBody(
  response: Response,
  path: string,
  onBytes: (totalBytes: number) => void,
): Promise<number> {
  if (!response.body) throw new CliError("The answer has no body");
  const out = createWriteStream(path, { mode: 0o600 });
  let received = 0;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      received += chunk.byteLength;
      onBytes(received);
      if (!out.write(chunk)) {
        await new Promise<void>((resolve) => out.once("drain", () => resolve()));
      }
    }
  } finally {
    await new Promise<void>((resolve, reject) =>
      out.end((error?: Error | null) => error ? reject(error) : resolve())
    );
  }
  return received;
}
