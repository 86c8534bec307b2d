/** A raw SOCKS5 client, so a test chooses the command and the address type itself. */
import { RawConnection } from "./raw-http.ts";

export const SocksAtyp = { ipv4: 1, domain: 3, ipv6: 4 } as const;

/** VER CMD RSV ATYP DST.ADDR DST.PORT. */
export function socksRequest(
  command: number,
  atyp: number,
  address: Buffer,
  port: number,
): Buffer {
  const portBytes = Buffer.from([port >> 8, port & 0xff]);
  const addressBytes = atyp === SocksAtyp.domain
    ? Buffer.concat([Buffer.from([address.length]), address])
    : address;
  return Buffer.concat([Buffer.from([5, command, 0, atyp]), addressBytes, portBytes]);
}

export function ipv4Bytes(text: string): Buffer {
  return Buffer.from(text.split(".").map(Number));
}

/** 16 bytes of an IPv6 literal (full or with one `::`). */
export function ipv6Bytes(text: string): Buffer {
  const [head, tail] = text.split("::");
  const words = (
    part: string | undefined,
  ) => (part ? part.split(":").map((w) => parseInt(w, 16)) : []);
  const left = words(head);
  const right = words(tail);
  const all = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = Buffer.alloc(16);
  all.forEach((word, index) => bytes.writeUInt16BE(word, index * 2));
  return bytes;
}

export interface SocksOpen {
  connection: RawConnection;
  /** The method the server chose. */
  method: number;
  /** The RFC 1929 status; undefined when the method was not username/password. */
  authStatus?: number;
  /** The reply code to the request; undefined when it never came. */
  reply?: number;
}

/**
 * Greets (offering `methods`), authenticates with `username:password`, sends `request`, and
 * reads the reply's head. On success the connection is the tunnel.
 */
export async function socksOpen(
  port: number,
  credentials: { username: string; password: string },
  request: Buffer,
  methods: number[] = [2],
): Promise<SocksOpen> {
  const connection = await RawConnection.open(port);
  connection.write(Buffer.from([5, methods.length, ...methods]));
  const [, method] = await connection.take(2);
  if (method !== 2) return { connection, method };
  const user = Buffer.from(credentials.username);
  const pass = Buffer.from(credentials.password);
  connection.write(
    Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([pass.length]), pass]),
  );
  const [, authStatus] = await connection.take(2);
  if (authStatus !== 0) return { connection, method, authStatus };
  connection.write(request);
  const head = await connection.take(4);
  const rest = head[3] === 4 ? 16 + 2 : head[3] === 3 ? 1 + 2 : 4 + 2;
  const tail = await connection.take(head[3] === 3 ? 1 : rest);
  if (head[3] === 3) await connection.take(tail[0] + 2);
  return { connection, method, authStatus, reply: head[1] };
}
