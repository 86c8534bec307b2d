/** The client side of every upstream proxy handshake, shared by the gateway and the workers. */
export * from "./address.ts";
export * from "./bytes.ts";
export * from "./errors.ts";
export * from "./handshake.ts";
export * from "./http-body.ts";
export * from "./http-head.ts";
export * from "./http-request.ts";
export * from "./socks4.ts";
export * from "./socks5.ts";
export * from "./types.ts";
