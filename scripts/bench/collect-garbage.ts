/**
 * Has a Deno process started with `--inspect=127.0.0.1:<port>` collect its garbage (a full
 * V8 collection through the inspector's HeapProfiler.collectGarbage), so a memory reading after
 * it counts what is live rather than when the collector last ran. Prints the JavaScript heap
 * after it (Runtime.getHeapUsage) as `{"usedBytes": N, "totalBytes": N}`.
 *
 *   DENO_NO_UPDATE_CHECK=1 npx deno run --allow-net scripts/bench/collect-garbage.ts <port>
 */
import { entryArguments } from "./entry-args.ts";

export interface HeapUsage {
  usedBytes: number;
  totalBytes: number;
}

const [port] = entryArguments();
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as {
  webSocketDebuggerUrl: string;
}[];
// The main isolate is listed first.
const socket = new WebSocket(targets[0].webSocketDebuggerUrl);
const heap = await new Promise<{ usedSize: number; totalSize: number }>((resolve, reject) => {
  socket.onopen = () => {
    socket.send(JSON.stringify({ id: 1, method: "HeapProfiler.collectGarbage" }));
    socket.send(JSON.stringify({ id: 2, method: "Runtime.getHeapUsage" }));
  };
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as {
      id?: number;
      error?: unknown;
      result?: { usedSize: number; totalSize: number };
    };
    if (message.error !== undefined) reject(new Error(JSON.stringify(message.error)));
    else if (message.id === 2) resolve(message.result!);
  };
  socket.onerror = () => reject(new Error("inspector connection failed"));
});
socket.close();
const usage: HeapUsage = { usedBytes: heap.usedSize, totalBytes: heap.totalSize };
console.log(JSON.stringify(usage));
