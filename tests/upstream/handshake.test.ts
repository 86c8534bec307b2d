import { describe, expect, it } from "vitest";
import {
  createClientHandshake,
  type HandshakeStep,
} from "../../shared/proxy-protocol/handshake.ts";
import { HandshakeFailure, UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import type { UpstreamProxy } from "../../shared/proxy-protocol/types.ts";

const hex = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString("hex");
const from = (value: string) => new Uint8Array(Buffer.from(value.replace(/\s+/g, ""), "hex"));
const latin1 = (value: string) => new Uint8Array(Buffer.from(value, "latin1"));
const target = { host: "example.com", port: 443 };

/** Feeds `reply` in pieces of `size` bytes; answers the steps that wrote or finished. */
function feed(push: (chunk: Uint8Array) => HandshakeStep, reply: Uint8Array, size: number) {
  const steps: HandshakeStep[] = [];
  for (let offset = 0; offset < reply.length; offset += size) {
    const step = push(reply.subarray(offset, offset + size));
    if (step.write || step.done) steps.push(step);
  }
  return steps;
}

describe("client handshakes", () => {
  it("HTTP CONNECT: leftover bytes after the head are handed back, at any split", () => {
    const proxy: UpstreamProxy = {
      scheme: "https",
      host: "p",
      port: 1,
      username: "a",
      password: "b",
    };
    const reply = latin1("HTTP/1.1 200 OK\r\n\r\nTARGET");
    for (const size of [1, 3, 7, reply.length]) {
      const handshake = createClientHandshake(proxy, target);
      expect(Buffer.from(handshake.start()).toString()).toContain(
        "Proxy-Authorization: Basic YTpi",
      );
      const steps = feed((chunk) => handshake.push(chunk), reply.subarray(0, 19), size);
      expect(steps.length).toBe(1);
      expect(steps[0].done).toBe(true);
      const last = handshake;
      expect(() => last.push(latin1("x"))).toThrow(UpstreamHandshakeError);
    }
    const handshake = createClientHandshake(proxy, target);
    handshake.start();
    const step = handshake.push(reply);
    expect(step.done).toBe(true);
    expect(Buffer.from(step.leftover).toString()).toBe("TARGET");
  });

  it("HTTP CONNECT: skips interim 1xx, fails on 407 and 502 with the status", () => {
    const proxy: UpstreamProxy = { scheme: "http", host: "p", port: 1 };
    const interim = createClientHandshake(proxy, target);
    const step = interim.push(latin1("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"));
    expect(step.done).toBe(true);
    for (
      const [status, reason] of [[407, HandshakeFailure.authRequired], [
        502,
        HandshakeFailure.status,
      ]] as const
    ) {
      const handshake = createClientHandshake(proxy, target);
      try {
        handshake.push(latin1(`HTTP/1.1 ${status} Nope\r\nContent-Length: 0\r\n\r\n`));
        throw new Error("expected a refusal");
      } catch (error) {
        expect(error).toBeInstanceOf(UpstreamHandshakeError);
        expect((error as UpstreamHandshakeError).status).toBe(status);
        expect((error as UpstreamHandshakeError).reason).toBe(reason);
      }
    }
  });

  it("SOCKS5 with credentials: greeting, auth, connect, in lockstep, at any split", () => {
    const proxy: UpstreamProxy = {
      scheme: "socks5",
      host: "p",
      port: 1,
      username: "u",
      password: "pw",
    };
    for (const size of [1, 2, 64]) {
      const handshake = createClientHandshake(proxy, target);
      expect(hex(handshake.start())).toBe("05020002");
      const writes: string[] = [];
      const push = (chunk: Uint8Array) => handshake.push(chunk);
      for (const reply of ["0502", "0100", "05000001 7f000001 1f"]) {
        for (const step of feed(push, from(reply), size)) {
          expect(step.done).toBe(false);
          writes.push(hex(step.write));
        }
      }
      expect(writes).toEqual([
        "0101" + "75" + "02" + "7077",
        "050100030b" + hex(Buffer.from("example.com")) + "01bb",
      ]);
      // The reply's last byte arrives with the target's first bytes.
      const final = handshake.push(from("90 4142"));
      expect(final.done).toBe(true);
      expect(Buffer.from(final.leftover).toString()).toBe("AB");
    }
  });

  it("SOCKS5 without credentials goes straight to CONNECT; a refusal carries its code", () => {
    const handshake = createClientHandshake({ scheme: "socks5", host: "p", port: 1 }, target);
    expect(hex(handshake.start())).toBe("050100");
    expect(hex(handshake.push(from("0500")).write)).toBe(
      "050100030b" + hex(Buffer.from("example.com")) + "01bb",
    );
    try {
      handshake.push(from("0504000100000000 0000"));
      throw new Error("expected a refusal");
    } catch (error) {
      expect((error as UpstreamHandshakeError).replyCode).toBe(4);
      expect((error as UpstreamHandshakeError).reason).toBe(HandshakeFailure.rejected);
    }
  });

  it("SOCKS4a: the user id is the username, and the reply may come in pieces", () => {
    const handshake = createClientHandshake(
      { scheme: "socks4", host: "p", port: 1, username: "bob" },
      target,
    );
    expect(hex(handshake.start())).toBe(
      "040101bb00000001" + hex(Buffer.from("bob")) + "00" + hex(Buffer.from("example.com")) + "00",
    );
    expect(handshake.push(from("005a00")).done).toBe(false);
    const step = handshake.push(from("0000000000ff"));
    expect(step.done).toBe(true);
    expect(hex(step.leftover)).toBe("ff");
  });

  it("refuses what a scheme cannot express before sending anything", () => {
    expect(() =>
      createClientHandshake({ scheme: "socks4", host: "p", port: 1 }, { host: "::1", port: 1 })
    )
      .toThrow(UpstreamHandshakeError);
  });
});
