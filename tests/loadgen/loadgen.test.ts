/**
 * proxy-loadgen's pure parts: the histogram's buckets and percentiles, the command line, and
 * the incremental response reader; its socks5 and direct scenarios against Debian's Dante; and
 * the throughput bench's latency-added arithmetic.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort } from "../../testkit/ports.ts";
import { startDante } from "../../testkit/upstreams/dante.ts";
import { latencyAdded } from "../../scripts/bench/throughput.ts";
import { runLoad } from "../../scripts/loadgen/run.ts";
import { bucketOf, bucketUpperBound, Histogram } from "../../scripts/loadgen/histogram.ts";
import {
  parseCommandLine,
  parseDuration,
  toCommandLine,
  UsageError,
} from "../../scripts/loadgen/options.ts";
import { ProtocolError, ResponseReader } from "../../scripts/loadgen/response.ts";

describe("histogram", () => {
  it("keeps small values exact and large ones within 1/64", () => {
    for (const value of [0, 1, 63, 127]) expect(bucketUpperBound(bucketOf(value))).toBe(value);
    for (const value of [128, 129, 1000, 65_535, 1_234_567, 2 ** 31 + 5, 9e12]) {
      const upper = bucketUpperBound(bucketOf(value));
      expect(upper).toBeGreaterThanOrEqual(value);
      expect((upper - value) / value).toBeLessThan(1 / 64);
    }
  });

  it("numbers its buckets without gaps or overlaps", () => {
    let previous = -1;
    const jumps: number[] = [];
    for (let value = 0; value < 1 << 20; value++) {
      const bucket = bucketOf(value);
      if (bucket !== previous && bucket !== previous + 1) jumps.push(value);
      if (bucket !== previous && bucketUpperBound(previous) !== value - 1) jumps.push(value);
      previous = bucket;
    }
    expect(jumps).toEqual([]);
  });

  it("answers percentiles as bucket upper bounds, never above the maximum", () => {
    const histogram = new Histogram();
    for (let i = 1; i <= 1000; i++) histogram.record(i);
    expect(histogram.count).toBe(1000);
    expect(histogram.percentile(0.5)).toBeGreaterThanOrEqual(500);
    expect(histogram.percentile(0.5)).toBeLessThan(500 * (1 + 1 / 64));
    expect(histogram.percentile(0.99)).toBeGreaterThanOrEqual(990);
    expect(histogram.percentile(1)).toBe(1000);
    expect(histogram.max).toBe(1000);
    expect(histogram.mean).toBeCloseTo(500.5);
    const other = new Histogram();
    other.record(5000);
    histogram.merge(other);
    expect(histogram.max).toBe(5000);
    expect(new Histogram().percentile(0.99)).toBe(0);
  });
});

describe("command line", () => {
  it("reads the proxy's login, the scenario and the limits", () => {
    const { options, json } = parseCommandLine([
      "--proxy",
      "http://us%40er:p%3Ass@127.0.0.1:8080",
      "--url",
      "http://127.0.0.1:9000/x?y=1",
      "--scenario",
      "connect",
      "--requests",
      "500",
      "--concurrency",
      "16",
      "--rate",
      "2000",
      "--header",
      "X-A: 1",
      "--header",
      "X-A: 2",
      "--json",
    ]);
    expect(json).toBe(true);
    expect(options.proxy).toEqual({
      host: "127.0.0.1",
      port: 8080,
      authorization: `Basic ${Buffer.from("us@er:p:ss").toString("base64")}`,
    });
    expect(options.scenario).toBe("connect");
    expect(options.requests).toBe(500);
    expect(options.durationMs).toBeUndefined();
    expect(options.concurrency).toBe(16);
    expect(options.rate).toBe(2000);
    expect(options.headers).toEqual([["X-A", "1"], ["X-A", "2"]]);
    // And back: the child process gets the same options.
    expect(parseCommandLine(toCommandLine(options)).options).toEqual(options);
  });

  it("defaults to ten seconds of keep-alive HTTP, and refuses nonsense", () => {
    const { options } = parseCommandLine(["--proxy", "127.0.0.1:3128", "--url", "http://o/"]);
    expect(options.scenario).toBe("http");
    expect(options.durationMs).toBe(10_000);
    expect(options.proxy.authorization).toBeUndefined();
    expect(parseDuration("250ms", "x")).toBe(250);
    expect(parseDuration("1.5m", "x")).toBe(90_000);
    expect(parseDuration("7", "x")).toBe(7000);
    const bad = [
      ["--url", "http://o/"],
      ["--proxy", "http://p:1", "--url", "http://o/", "--requests", "5", "--duration", "1s"],
      ["--proxy", "http://p:1", "--url", "http://o/", "--scenario", "socks"],
      ["--proxy", "http://p:1", "--url", "http://o/", "--concurrency", "0"],
      ["--proxy", "http://p", "--url", "http://o/"],
      ["--proxy", "http://p:1", "--url", "https://o/"],
      ["--proxy", "http://p:1", "--url", "http://o/", "--header", "nocolon"],
      ["--proxy", "http://p:1", "--url", "http://o/", "--bogus"],
    ];
    for (const argv of bad) expect(() => parseCommandLine(argv)).toThrow(UsageError);
  });
});

describe("the extract scenario", () => {
  it("calls the api itself with the key, and goes to a child process unchanged", () => {
    const url = "http://127.0.0.1:8000/api/v1/projects/0a0b/extract";
    const { options } = parseCommandLine([
      "--scenario",
      "extract",
      "--url",
      url,
      "--key",
      "oxd_abc",
      "--count",
      "3",
      "--rate",
      "2000",
    ]);
    expect(options.proxy).toEqual({ host: "127.0.0.1", port: 8000 });
    expect(options.method).toBe("POST");
    expect(options.extract).toEqual({ key: "oxd_abc", count: 3 });
    expect(parseCommandLine(toCommandLine(options)).options).toEqual(options);
    const defaults = parseCommandLine(["--scenario", "extract", "--url", url, "--key", "oxd_a"]);
    expect(defaults.options.extract).toEqual({ key: "oxd_a", count: 1 });
    const bad = [
      ["--scenario", "extract", "--url", url],
      ["--scenario", "extract", "--url", url, "--key", "k", "--proxy", "http://p:1"],
      ["--scenario", "extract", "--url", url, "--key", "k", "--count", "0"],
      ["--proxy", "http://p:1", "--url", "http://o/", "--key", "k"],
    ];
    for (const argv of bad) expect(() => parseCommandLine(argv)).toThrow(UsageError);
  });
});

describe("the socks5 and direct scenarios", () => {
  it("take a socks5:// proxy with its login, or none, and go to a child process unchanged", () => {
    const { options } = parseCommandLine([
      "--scenario",
      "socks5",
      "--proxy",
      "socks5://us%40er:p%3Ass@127.0.0.1:1080",
      "--url",
      "http://127.0.0.1:9000/",
      "--rate",
      "200",
    ]);
    expect(options.proxy).toEqual({
      host: "127.0.0.1",
      port: 1080,
      authorization: `Basic ${Buffer.from("us@er:p:ss").toString("base64")}`,
    });
    expect(parseCommandLine(toCommandLine(options)).options).toEqual(options);
    const direct = parseCommandLine(["--scenario", "direct", "--url", "http://127.0.0.1:9000/"]);
    expect(direct.options.proxy).toEqual({ host: "127.0.0.1", port: 9000 });
    expect(parseCommandLine(toCommandLine(direct.options)).options).toEqual(direct.options);
    const bad = [
      ["--scenario", "socks5", "--proxy", "http://p:1", "--url", "http://o/"],
      ["--scenario", "http", "--proxy", "socks5://p:1", "--url", "http://o/"],
      ["--scenario", "direct", "--proxy", "http://p:1", "--url", "http://o/"],
    ];
    for (const argv of bad) expect(() => parseCommandLine(argv)).toThrow(UsageError);
  });

  it("open a tunnel per request through Debian's Dante, and connect straight", async () => {
    const origin = createServer((_request, response) => response.end("hello"));
    await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const dante = await startDante();
    try {
      const url = new URL(`http://127.0.0.1:${(origin.address() as AddressInfo).port}/`);
      const common = {
        url,
        requests: 20,
        warmupMs: 0,
        concurrency: 4,
        timeoutMs: 5_000,
        method: "GET",
        headers: [] as [string, string][],
      };
      const viaDante = await runLoad({
        ...common,
        scenario: "socks5",
        proxy: { host: "127.0.0.1", port: dante.port },
      });
      expect({ ok: viaDante.ok, errors: viaDante.errors }).toEqual({ ok: 20, errors: {} });
      expect(viaDante.connections).toBe(20);
      const direct = await runLoad({
        ...common,
        scenario: "direct",
        proxy: { host: url.hostname, port: Number(url.port) },
      });
      expect({ ok: direct.ok, errors: direct.errors }).toEqual({ ok: 20, errors: {} });
      // A SOCKS5 proxy that is not there: each request fails, classed.
      const closed = await runLoad({
        ...common,
        requests: 2,
        scenario: "socks5",
        proxy: { host: "127.0.0.1", port: await freePort() },
      });
      expect(closed.errors).toEqual({ "connect refused": 2 });
    } finally {
      await dante.stop();
      origin.close();
    }
  });
});

describe("latency added", () => {
  it("is each run's difference from the same run's baseline, then the median", () => {
    const at = (p50: number, p99: number) => ({ p50, p90: 0, p99, max: 0, mean: 0 });
    const added = latencyAdded(
      [at(2, 10), at(3, 30), at(9, 12)],
      [at(1, 5), at(1, 40), at(1, 4)],
    );
    expect(added.p50).toEqual({ value: 2, runs: [1, 2, 8] });
    expect(added.p99).toEqual({ value: 5, runs: [5, -10, 8] });
  });
});

describe("response reader", () => {
  const feedAll = (reader: ResponseReader, text: string, step: number) => {
    const bytes = Buffer.from(text, "latin1");
    let used = 0;
    for (let i = 0; i < bytes.length && !reader.done; i += step) {
      used += reader.feed(bytes.subarray(i, Math.min(bytes.length, i + step)));
    }
    return used;
  };

  it("reads Content-Length and chunked bodies fed a byte at a time", () => {
    const plain = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    const chunked = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n" +
      "5;x=y\r\nhello\r\n3\r\nabc\r\n0\r\nTrailer: 1\r\n\r\n";
    for (const step of [1, 3, 1000]) {
      const a = new ResponseReader();
      expect(feedAll(a, `${plain}EXTRA`, step)).toBeLessThanOrEqual(plain.length + step);
      expect([a.done, a.status, a.keepAlive]).toEqual([true, 200, true]);
      const b = new ResponseReader();
      feedAll(b, chunked, step);
      expect([b.done, b.status]).toEqual([true, 404]);
      // Kept when asked (the extract scenario reads its answers), never otherwise.
      expect(b.body.length).toBe(0);
      const kept = new ResponseReader({ keepBody: true });
      feedAll(kept, chunked, step);
      expect(kept.body.toString()).toBe("helloabc");
      const keptPlain = new ResponseReader({ keepBody: true });
      feedAll(keptPlain, plain, step);
      expect(keptPlain.body.toString()).toBe("hello");
    }
  });

  it("tells a closing connection, an interim answer and a tunnel's start", () => {
    const closing = new ResponseReader();
    closing.feed(Buffer.from("HTTP/1.0 200 OK\r\n\r\nuntil close"));
    expect([closing.done, closing.untilClose, closing.keepAlive]).toEqual([false, true, false]);
    expect(closing.end()).toBe(true);
    const interim = new ResponseReader();
    interim.feed(Buffer.from("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"));
    expect([interim.done, interim.status]).toEqual([true, 204]);
    const tunnel = new ResponseReader({ connect: true });
    const used = tunnel.feed(Buffer.from("HTTP/1.1 200 Connection established\r\n\r\nTLS"));
    expect([tunnel.done, used]).toEqual([true, 39]);
    const refused = new ResponseReader({ connect: true });
    refused.feed(
      Buffer.from("HTTP/1.1 407 Auth\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"),
    );
    expect([refused.done, refused.status, refused.keepAlive]).toEqual([false, 407, false]);
    expect(() => new ResponseReader().feed(Buffer.from("SSH-2.0\r\n\r\n"))).toThrow(ProtocolError);
  });
});
