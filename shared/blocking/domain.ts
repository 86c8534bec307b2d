/**
 * The site a cool-down is kept for: the target host's registrable domain (the public suffix and
 * one label before it, by the Public Suffix List with its private section, so `a.github.io` and
 * `b.github.io` are two sites), or the host itself when it has none (an IP address, `localhost`).
 * An exit banned by `shop.example` keeps serving `news.example`.
 *
 * Runs unchanged on Node and Deno.
 */
import { getDomain } from "tldts";
import { normaliseHost } from "../net/host.ts";

const cache = new Map<string, string>();
const CACHE_MAX = 10_000;

export function siteOf(host: string): string {
  const name = normaliseHost(host);
  const known = cache.get(name);
  if (known !== undefined) return known;
  const site = getDomain(name, { allowPrivateDomains: true }) ?? name;
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(name, site);
  return site;
}
