/**
 * Encrypted DNS a device could use to look names up past the tunnel resolver, which the plane
 * closes when OCTOPROX_TUNNEL_BLOCK_ENCRYPTED_DNS is on: DNS over TLS (port 853, any host) and
 * DNS over HTTPS to the well-known public resolvers, by name or by address. A closed connection
 * makes browsers and systems fall back to the system resolver, which is the tunnel's. Firefox
 * is told the same by its canary name (resolver.ts).
 */

export const DNS_OVER_TLS_PORT = 853;

/** Names of public DNS-over-HTTPS endpoints (and every name under them). */
export const DOH_HOSTS: readonly string[] = [
  "dns.google",
  "dns.google.com",
  "cloudflare-dns.com",
  "dns.quad9.net",
  "doh.opendns.com",
  "dns.adguard-dns.com",
  "dns.adguard.com",
  "doh.cleanbrowsing.org",
  "dns.nextdns.io",
  "doh.mullvad.net",
  "dns.controld.com",
  "doh.dns.sb",
  "freedns.controld.com",
];

/** Their anycast addresses, for apps that dial them without a lookup. */
export const DOH_ADDRESSES: readonly string[] = [
  "8.8.8.8",
  "8.8.4.4",
  "1.1.1.1",
  "1.0.0.1",
  "1.1.1.2",
  "1.0.0.2",
  "1.1.1.3",
  "1.0.0.3",
  "9.9.9.9",
  "149.112.112.112",
  "9.9.9.11",
  "208.67.222.222",
  "208.67.220.220",
  "94.140.14.14",
  "94.140.15.15",
  "185.228.168.168",
  "185.228.169.168",
  "45.90.28.0",
  "45.90.30.0",
  "194.242.2.2",
  "76.76.2.0",
  "76.76.10.0",
];

const HOSTS = new Set(DOH_HOSTS);
const ADDRESSES = new Set(DOH_ADDRESSES);

/** Whether a connection to `host:port` is encrypted DNS (`host` lower case, a name or address). */
export function isEncryptedDns(host: string, port: number): boolean {
  if (port === DNS_OVER_TLS_PORT) return true;
  if (port !== 443) return false;
  if (ADDRESSES.has(host)) return true;
  for (let name = host; name !== "";) {
    if (HOSTS.has(name)) return true;
    const dot = name.indexOf(".");
    if (dot === -1) break;
    name = name.slice(dot + 1);
  }
  return false;
}
