/**
 * `octoprox devices` and `octoprox wireguard` against a real control process (role all): the
 * settings shown and changed (the endpoint host a config waits for), devices added with a
 * generated key pair and with the device's own public key, listed (one project's, or every
 * project's, with what each carried), shown by name or id, its usage (all-time and over a range),
 * edited (an API refusal exit 1, nothing to change exit 2), the config written to a 0600 file and
 * as a QR code's SVG, its keys in no other output, new keys, removal and the server key's rotation
 * confirmed in a real terminal, and usage errors exit 2. Then `octoprox openvpn` and OpenVPN
 * devices through the same commands: the settings (a keepalive the API refuses, the CA's
 * certificate alone), a device added with `--protocol openvpn`, listed beside WireGuard's, its
 * `.ovpn` written 0600 (no QR code), a new certificate, and the identity's rotation.
 */
import { generateKeyPairSync } from "node:crypto";
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SERVER_KEY_ROTATED } from "../../control/api/answers/wireguard.ts";
import { OPENVPN_IDENTITY_ROTATED } from "../../control/api/answers/openvpn.ts";
import { Cluster } from "../../testkit/cluster.ts";
import { type CliRun, CliUser, Terminal } from "./support.ts";

let cluster: Cluster;
const user = new CliUser();
const terminals: Terminal[] = [];
/** Every run's output but the config's own, to show no key leaks into it. */
const outputs: string[] = [];

interface Device {
  id: string;
  name: string;
  address: string;
  enabled: boolean;
  country: string | null;
  state: string | null;
  city: string | null;
  session_id: string | null;
  public_key: string | null;
  has_private_key: boolean;
}

async function octoprox(args: string[]): Promise<CliRun> {
  const run = await user.run(args);
  outputs.push(run.stdout, run.stderr);
  return run;
}

async function json<T>(args: string[]): Promise<T> {
  const run = await octoprox([...args, "--json"]);
  if (run.code !== 0) {
    throw new Error(`octoprox ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  }
  return JSON.parse(run.stdout) as T;
}

function terminal(): Terminal {
  const made = new Terminal();
  terminals.push(made);
  return made;
}

/** A key pair as `wg genkey | wg pubkey` makes it: raw 32-byte keys in base64. */
function devicePair(): { privateKey: string; publicKey: string } {
  const jwk = generateKeyPairSync("x25519").privateKey.export({ format: "jwk" });
  const b64 = (text: string) => Buffer.from(text, "base64url").toString("base64");
  return { privateKey: b64(jwk.d!), publicKey: b64(jwk.x!) };
}

/** A config's `Key = value` lines. */
function linesOf(text: string): Map<string, string> {
  return new Map(
    text.split("\n").filter((l) => l.includes(" = ")).map((l) => {
      const at = l.indexOf(" = ");
      return [l.slice(0, at), l.slice(at + 3)];
    }),
  );
}

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  await user.loginWithToken(cluster, "devices-test");
  await json(["projects", "create", "phones"]);
  await json(["projects", "create", "laptops"]);
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const made of terminals) made.close();
  user.remove();
  await cluster?.close();
});

describe("octoprox wireguard settings", () => {
  it("shows the settings, and changes them (an out-of-range value refused by the API)", async () => {
    const shown = await octoprox(["wireguard", "settings"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/Subnet\s+10\.66\.0\.0\/16/);
    expect(shown.stdout).toMatch(/Gateway address\s+10\.66\.0\.1/);
    expect(shown.stdout).toMatch(/Endpoint host\s+not set/);

    const updated = await octoprox([
      "wireguard",
      "settings",
      "--endpoint-host",
      "VPN.example.com",
      "--keepalive",
      "15",
      "--mtu",
      "1380",
    ]);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toContain("Updated the WireGuard settings.");
    expect(updated.stdout).toMatch(/Endpoint host\s+vpn\.example\.com/);
    expect(updated.stdout).toMatch(/Keepalive\s+15 s/);
    const settings = await json<Record<string, unknown>>(["wireguard", "settings"]);
    expect(settings).toMatchObject({
      endpoint_host: "vpn.example.com",
      mtu: 1380,
      persistent_keepalive_seconds: 15,
      listen_port: 51820,
    });

    const refused = await octoprox(["wireguard", "settings", "--mtu", "9000"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("422");
    expect(refused.stderr).toContain("body.mtu");
  });
});

describe("octoprox devices", () => {
  let pixel: Device;
  let tablet: Device;
  const own = devicePair();

  it("adds devices with generated keys or the device's own public key", async () => {
    const added = await octoprox([
      "devices",
      "add",
      "pixel",
      "--project",
      "phones",
      "--country",
      "de",
      "--city",
      "berlin",
      "--session",
      "42",
    ]);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain("Added device pixel at 10.66.0.2.");
    expect(added.stdout).toMatch(/Country\s+DE/);
    expect(added.stdout).toMatch(/Private key\s+kept by the server/);
    expect(added.stderr).toContain(
      "octoprox devices config pixel --project phones --output pixel.conf",
    );
    pixel = await json<Device>(["devices", "show", "pixel", "-p", "phones"]);
    expect(pixel).toMatchObject({
      address: "10.66.0.2",
      enabled: true,
      country: "DE",
      city: "berlin",
      session_id: "42",
      has_private_key: true,
    });

    tablet = await json<Device>([
      "devices",
      "add",
      "tablet",
      "-p",
      "phones",
      "--public-key",
      own.publicKey,
      "--disabled",
    ]);
    expect(tablet).toMatchObject({
      address: "10.66.0.3",
      enabled: false,
      public_key: own.publicKey,
      has_private_key: false,
    });
    await json(["devices", "add", "work", "-p", "laptops"]);

    const duplicate = await octoprox(["devices", "add", "PIXEL", "-p", "phones"]);
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain("400");
    expect(duplicate.stderr).toContain("body.name");
  });

  it("lists a project's devices, or every project's, and shows one by name or id", async () => {
    const listed = await octoprox(["devices", "list", "--project", "phones"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(
      /Name\s+│\s+Tunnel\s+│\s+Address\s+│\s+Country\s+│\s+State\s+│\s+City/,
    );
    expect(listed.stdout).toMatch(
      /pixel\s+│\s+WireGuard\s+│\s+10\.66\.0\.2\s+│\s+DE\s+│\s+–\s+│\s+berlin\s+│\s+42\s+│\s+yes\s+│\s+no\s+│\s+never/,
    );
    expect(listed.stdout).toMatch(
      /tablet\s+│\s+WireGuard\s+│\s+10\.66\.0\.3\s+│.*│\s+no\s+│\s+no\s+│\s+never/,
    );
    expect(listed.stdout).toMatch(/Last seen\s+│\s+Requests\s+│\s+Sent\s+│\s+Received\s+│\s+Id/);
    expect(listed.stdout).not.toContain("work");

    const all = await octoprox(["devices", "list"]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toMatch(/Project\s+│\s+Name/);
    expect(all.stdout).toMatch(/phones\s+│\s+pixel/);
    expect(all.stdout).toMatch(/laptops\s+│\s+work\s+│\s+WireGuard\s+│\s+10\.66\.0\.4/);
    const every = await json<Device[]>(["devices", "list"]);
    expect(every.map((d) => d.name)).toEqual(["pixel", "tablet", "work"]);

    const byId = await json<Device>(["devices", "show", pixel.id, "-p", "phones"]);
    expect(byId.name).toBe("pixel");
    const shown = await octoprox(["devices", "show", "TABLET", "-p", "phones"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/Enabled\s+no/);
    expect(shown.stdout).toMatch(/Online\s+no/);
    expect(shown.stdout).toMatch(/Private key\s+the device's own/);

    const missing = await octoprox(["devices", "show", "nothing", "-p", "phones"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('No device "nothing" (known: pixel, tablet)');
    // Another project's device is not this project's.
    expect((await octoprox(["devices", "show", "work", "-p", "phones"])).code).toBe(1);
  });

  it("shows a device's usage: its all-time totals and its requests over a range", async () => {
    const shown = await octoprox(["devices", "usage", "pixel", "-p", "phones", "--range", "7d"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain("pixel (10.66.0.2): usage since the start");
    expect(shown.stdout).toMatch(/Requests\s+0/);
    expect(shown.stdout).toMatch(/Sent\s+0 B/);
    expect(shown.stdout).toMatch(/Encrypted DNS closed\s+0/);
    expect(shown.stdout).toMatch(/Requests over 7d \(0, peak 0 in 3600 s\)/);
    const read = await json<{ device: Device & { usage: object }; history: object }>([
      "devices",
      "usage",
      "pixel",
      "-p",
      "phones",
    ]);
    expect(read.device.usage).toMatchObject({ requests: 0, bytes_sent: 0, live_included: true });
    expect(read.history).toMatchObject({ range: "24h", bucket_seconds: 60 });
    const missing = await octoprox(["devices", "usage", "nothing", "-p", "phones"]);
    expect(missing.code).toBe(1);
  });

  it("edits a device's options, name and whether it connects", async () => {
    const edited = await octoprox([
      "devices",
      "edit",
      "pixel",
      "-p",
      "phones",
      "--state",
      "by",
      "--city",
      "munich",
      "--session",
      "",
      "--disable",
    ]);
    expect(edited.code, edited.stderr).toBe(0);
    expect(edited.stdout).toContain("Updated device pixel.");
    expect(await json<Device>(["devices", "show", "pixel", "-p", "phones"])).toMatchObject({
      enabled: false,
      country: "DE",
      state: "BY",
      city: "munich",
      session_id: null,
    });
    const renamed = await json<Device>([
      "devices",
      "edit",
      "tablet",
      "-p",
      "phones",
      "--name",
      "ipad",
      "--enable",
    ]);
    expect(renamed).toMatchObject({ name: "ipad", enabled: true, address: "10.66.0.3" });
    await json(["devices", "edit", "pixel", "-p", "phones", "--enable"]);

    // Clearing the country a city rests on: the API's refusal, in its words, nothing changed.
    const refused = await octoprox(["devices", "edit", "pixel", "-p", "phones", "--country", ""]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("422");
    expect(refused.stderr).toContain("body.country");
    expect((await json<Device>(["devices", "show", "pixel", "-p", "phones"])).country).toBe("DE");
  });

  it("writes the config to a 0600 file, and as a QR code", async () => {
    const file = join(user.configHome, "pixel.conf");
    const written = await octoprox([
      "devices",
      "config",
      "pixel",
      "-p",
      "phones",
      "--output",
      file,
    ]);
    expect(written.code, written.stderr).toBe(0);
    expect(written.stdout).toMatch(
      new RegExp(`^Wrote ${file} \\(pixel's config, \\d+ B\\)\\.\\n$`),
    );
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const text = await readFile(file, "utf8");
    expect(text).toContain("[Interface]");
    expect(text).toContain("[Peer]");
    const config = linesOf(text);
    const settings = await json<{ public_key: string }>(["wireguard", "settings"]);
    expect(config.get("Address")).toBe("10.66.0.2/32");
    expect(config.get("DNS")).toBe("10.66.0.1");
    expect(config.get("MTU")).toBe("1380");
    expect(config.get("PublicKey")).toBe(settings.public_key);
    expect(config.get("Endpoint")).toBe("vpn.example.com:51820");
    expect(config.get("PersistentKeepalive")).toBe("15");
    const privateKey = config.get("PrivateKey")!;
    const presharedKey = config.get("PresharedKey")!;
    expect(privateKey).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(presharedKey).toMatch(/^[A-Za-z0-9+/]{43}=$/);

    // To stdout when no file is named: the same text.
    const printed = await user.run(["devices", "config", "pixel", "-p", "phones"]);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).toBe(text);

    const svgFile = join(user.configHome, "pixel.svg");
    const qr = await octoprox([
      "devices",
      "config",
      "pixel",
      "-p",
      "phones",
      "--qr",
      "-o",
      svgFile,
    ]);
    expect(qr.code, qr.stderr).toBe(0);
    expect(qr.stdout).toContain("config as a QR code");
    expect(await readFile(svgFile, "utf8")).toMatch(
      /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/,
    );
    expect(statSync(svgFile).mode & 0o777).toBe(0o600);
    const noFile = await octoprox(["devices", "config", "pixel", "-p", "phones", "--qr"]);
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain("--qr writes an SVG file: give --output <file>.");

    // New keys: the config written before no longer holds the device's.
    const rotated = await octoprox(["devices", "rotate-keys", "pixel", "-p", "phones", "--yes"]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain("Rotated the keys of device pixel.");
    await octoprox(["devices", "config", "pixel", "-p", "phones", "-o", file]);
    const fresh = linesOf(await readFile(file, "utf8"));
    expect(fresh.get("PrivateKey")).not.toBe(privateKey);
    expect(fresh.get("PresharedKey")).not.toBe(presharedKey);

    // No output but the config's own carries a key of a config.
    for (const output of outputs) {
      for (const key of [privateKey, presharedKey, fresh.get("PrivateKey")!]) {
        expect(output).not.toContain(key);
      }
    }
  });

  it("waits for the endpoint host before it writes a config", async () => {
    await json(["wireguard", "settings", "--endpoint-host", ""]);
    const waiting = await octoprox(["devices", "config", "pixel", "-p", "phones"]);
    expect(waiting.code).toBe(1);
    expect(waiting.stderr).toContain("409");
    expect(waiting.stdout).toBe("");
    await json(["wireguard", "settings", "--endpoint-host", "vpn.example.com"]);
  });

  it("removes a device once confirmed in a terminal, and asks for --yes without one", async () => {
    const unasked = await octoprox(["devices", "remove", "ipad", "-p", "phones"]);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toContain("--yes");

    const kept = terminal();
    kept.start(user, ["devices", "remove", "ipad", "-p", "phones"]);
    await kept.until("Remove device ipad (10.66.0.3) from phones? [y/N]");
    kept.type("n");
    expect(await kept.exitCode()).toBe(0);
    expect(kept.screen()).toContain("Nothing removed.");

    const removed = terminal();
    removed.start(user, ["devices", "remove", "ipad", "-p", "phones"]);
    await removed.until("[y/N]");
    removed.type("y");
    expect(await removed.exitCode()).toBe(0);
    expect(removed.screen()).toContain("Removed device ipad.");
    const left = await json<Device[]>(["devices", "list", "-p", "phones"]);
    expect(left.map((d) => d.name)).toEqual(["pixel"]);
  });

  it("exits 2 for a missing argument or project, an unknown option, or contradicting flags", async () => {
    for (
      const args of [
        ["devices", "show", "-p", "phones"],
        ["devices", "add", "phone"],
        ["devices", "list", "--colour"],
        ["devices", "edit", "pixel", "-p", "phones"],
        ["devices", "edit", "pixel", "-p", "phones", "--enable", "--disable"],
        ["wireguard", "settings", "--listen-port", "port"],
        ["devices"],
      ]
    ) {
      const run = await octoprox(args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr, args.join(" ")).toMatch(/error|Usage/);
      expect(run.stdout, args.join(" ")).toBe("");
    }
  });
});

describe("octoprox wireguard rotate-key", () => {
  it("asks first, says every config is now invalid, and the API has a new key", async () => {
    const before = await json<{ public_key: string }>(["wireguard", "settings"]);
    const unasked = await octoprox(["wireguard", "rotate-key"]);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toContain("Every device config becomes invalid");

    const rotation = terminal();
    rotation.start(user, ["wireguard", "rotate-key"]);
    await rotation.until(
      "Rotate the WireGuard server key? Every device config becomes invalid until it is " +
        "downloaded again. [y/N]",
    );
    rotation.type("y");
    expect(await rotation.exitCode()).toBe(0);
    const after = await json<{ public_key: string }>(["wireguard", "settings"]);
    expect(after.public_key).not.toBe(before.public_key);
    const screen = rotation.screen().replaceAll("\n", "");
    expect(screen).toContain(SERVER_KEY_ROTATED);
    expect(screen).toContain(`Rotated the server key; its public key is ${after.public_key}.`);
    await cluster.logged(cluster.api, SERVER_KEY_ROTATED);
  });
});

/** A dozen CLI processes a test: about 20 s alone here, up to three times that under the suite. */
const CLI_TIMEOUT_MS = 120_000;

describe("OpenVPN", () => {
  interface OpenvpnDevice {
    id: string;
    name: string;
    protocol: string;
    address: string;
    certificate_serial: string;
  }

  it(
    "shows and changes the settings, prints the CA, and refuses a keepalive OpenVPN would",
    async () => {
      const shown = await octoprox(["openvpn", "settings"]);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toMatch(/Subnet\s+10\.67\.0\.0\/16/);
      expect(shown.stdout).toMatch(/Transport\s+UDP/);
      const updated = await octoprox([
        "openvpn",
        "settings",
        "--endpoint-host",
        "vpn.example.com",
        "--transport",
        "tcp",
        "--listen-port",
        "443",
      ]);
      expect(updated.code, updated.stderr).toBe(0);
      expect(updated.stdout).toContain("Updated the OpenVPN settings.");
      expect(updated.stdout).toMatch(/Transport\s+TCP/);
      const refused = await octoprox(["openvpn", "settings", "--keepalive-timeout", "15"]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("body.keepalive_timeout_seconds");
      const ca = await octoprox(["openvpn", "settings", "--ca"]);
      expect(ca.code, ca.stderr).toBe(0);
      expect(ca.stdout).toMatch(
        /^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/,
      );
      const bad = await octoprox(["openvpn", "settings", "--transport", "sctp"]);
      expect(bad.code).toBe(2);
    },
    CLI_TIMEOUT_MS,
  );

  it(
    "adds a device with --protocol openvpn, lists it beside WireGuard's, writes its profile",
    async () => {
      const desk = await json<OpenvpnDevice>([
        "devices",
        "add",
        "desk",
        "-p",
        "laptops",
        "--protocol",
        "openvpn",
        "--country",
        "de",
      ]);
      expect(desk).toMatchObject({ name: "desk", protocol: "openvpn", address: "10.67.0.2" });
      const listed = await octoprox(["devices", "list", "-p", "laptops"]);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toMatch(/desk\s*│\s*OpenVPN\s*│\s*10\.67\.0\.2/);
      const onlyOpenvpn = await json<OpenvpnDevice[]>([
        "devices",
        "list",
        "-p",
        "laptops",
        "--protocol",
        "openvpn",
      ]);
      expect(onlyOpenvpn.map((d) => d.name)).toEqual(["desk"]);
      const shown = await octoprox(["devices", "show", "desk", "-p", "laptops"]);
      expect(shown.stdout).toMatch(new RegExp(`Certificate serial\\s+${desk.certificate_serial}`));

      const file = join(user.configHome, "desk.ovpn");
      const written = await octoprox(["devices", "config", "desk", "-p", "laptops", "-o", file]);
      expect(written.code, written.stderr).toBe(0);
      expect(written.stdout).toMatch(/\(desk's profile, [\d.]+ K?B\)/);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const profile = await readFile(file, "utf8");
      expect(profile.split("\n")).toContain("proto tcp-client");
      expect(profile.split("\n")).toContain("remote vpn.example.com 443");
      expect(profile).toContain("<cert>");
      expect(profile).toContain("<tls-crypt>");
      const qr = await octoprox(["devices", "config", "desk", "-p", "laptops", "--qr", "-o", file]);
      expect(qr.code).toBe(2);
      expect(qr.stderr).toContain("too large for a QR code");
      const own = await octoprox([
        "devices",
        "add",
        "box",
        "-p",
        "laptops",
        "--protocol",
        "openvpn",
        "--public-key",
        devicePair().publicKey,
      ]);
      expect(own.code).toBe(2);

      const rotated = await json<OpenvpnDevice>([
        "devices",
        "rotate-keys",
        "desk",
        "-p",
        "laptops",
        "--yes",
      ]);
      expect(rotated.certificate_serial).not.toBe(desk.certificate_serial);
      // No key in any output but the profile's own file.
      const key = /<key>\n([\s\S]*?)\n<\/key>/.exec(profile)![1].split("\n")[1];
      expect(outputs.join("\n")).not.toContain(key);
    },
    CLI_TIMEOUT_MS,
  );

  it("rotates the identity once confirmed: a new CA, every profile invalid", async () => {
    const before = await json<{ ca_certificate: string }>(["openvpn", "settings"]);
    const rotated = await octoprox(["openvpn", "rotate-identity", "--yes"]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stderr + rotated.stdout).toContain(OPENVPN_IDENTITY_ROTATED);
    const after = await json<{ ca_certificate: string }>(["openvpn", "settings"]);
    expect(after.ca_certificate).not.toBe(before.ca_certificate);
    await cluster.logged(cluster.api, OPENVPN_IDENTITY_ROTATED);
  }, CLI_TIMEOUT_MS);
});
