/** Reading `Proxy-Authorization: Basic …` (RFC 7617), with web-standard APIs only. */

export interface BasicCredentials {
  username: string;
  password: string;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** The username and password of a Basic header; undefined when the header is anything else. */
export function parseBasicAuth(header: string | null): BasicCredentials | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  const space = value.indexOf(" ");
  if (space === -1 || value.slice(0, space).toLowerCase() !== "basic") return undefined;
  const encoded = value.slice(space + 1).trim();
  if (encoded === "" || !/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined;
  let text: string;
  try {
    text = atob(encoded);
  } catch {
    return undefined;
  }
  // atob yields one char per byte: read the bytes as UTF-8 when any is not ASCII.
  if (/[\u0080-\uffff]/.test(text)) {
    try {
      text = UTF8.decode(Uint8Array.from(text, (c) => c.charCodeAt(0)));
    } catch {
      return undefined;
    }
  }
  const colon = text.indexOf(":");
  if (colon <= 0) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** String equality whose time depends on the lengths only, for secrets. */
export function timingSafeEqual(a: string, b: string): boolean {
  const n = Math.max(a.length, b.length);
  let diff = a.length ^ b.length;
  for (let i = 0; i < n; i++) diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  return diff === 0;
}
