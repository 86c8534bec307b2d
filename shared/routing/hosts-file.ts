/**
 * A hosts file (/etc/hosts) read as the system's resolver reads it, for the destination guard's
 * lookups (gateway/net/io/resolve.ts). Runtime-neutral.
 */

/**
 * The addresses of each name in a hosts file's text: names lower case without a trailing dot,
 * addresses in file order; comments and malformed lines are skipped.
 */
export function parseHostsFile(text: string): Map<string, string[]> {
  const names = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const fields = line.replace(/#.*/, "").trim().split(/[ \t]+/);
    if (fields.length < 2 || fields[0] === "") continue;
    const [address, ...aliases] = fields;
    // A zone (`fe80::1%eth0`) names an interface, not part of the address.
    const plain = address.replace(/%.*$/, "");
    for (const alias of aliases) {
      const name = alias.toLowerCase().replace(/\.$/, "");
      const known = names.get(name);
      if (known === undefined) names.set(name, [plain]);
      else if (!known.includes(plain)) known.push(plain);
    }
  }
  return names;
}
