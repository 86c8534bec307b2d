/**
 * `wireguard settings|rotate-key`: the install's WireGuard settings (the device subnet, the port
 * and host devices dial, the MTU and keepalive their configs carry) and its server key. Anyone
 * reads them; changes and the rotation are the admins'. The private key is never shown.
 */
import type { Command } from "commander";
import { SERVER_KEY_ROTATED, type WireguardSettings } from "../../api/answers/wireguard.ts";
import {
  connect,
  type JsonOption,
  leaf,
  outputOf,
  positiveInteger,
  wholeNumber,
} from "../command.ts";
import { emit, line, note, pc, printFields } from "../output.ts";
import { confirm } from "../prompt.ts";

const SETTINGS = "/wireguard/settings";

function printSettings(settings: WireguardSettings): void {
  printFields([
    ["Public key", settings.public_key],
    ["Subnet", settings.subnet],
    ["Gateway address", `${settings.gateway_address} (the devices' DNS)`],
    ["Listen port", settings.listen_port],
    ["Endpoint host", settings.endpoint_host ?? pc.yellow("not set: no device config until it is")],
    ["MTU", settings.mtu],
    [
      "Keepalive",
      settings.persistent_keepalive_seconds === 0
        ? "none"
        : `${settings.persistent_keepalive_seconds} s`,
    ],
    ["Updated", settings.updated_at],
  ]);
}

export function registerWireguard(program: Command): void {
  const wireguard = program.command("wireguard").description(
    "The install's WireGuard settings and server key (devices: octoprox devices)",
  );

  leaf(wireguard, "settings", "Show the WireGuard settings, or change them (admins)", [
    "octoprox wireguard settings",
    "octoprox wireguard settings --endpoint-host vpn.example.com --listen-port 51820",
    "octoprox wireguard settings --subnet 10.77.0.0/16 --mtu 1380 --keepalive 0",
  ])
    .option("--subnet <cidr>", "the devices' IPv4 block, /8 to /29")
    .option("--listen-port <port>", "the UDP port devices dial", positiveInteger)
    .option("--endpoint-host <host>", 'the host name or address devices dial ("" unsets it)')
    .option("--mtu <bytes>", "the tunnel's MTU, 1280 to 1500", positiveInteger)
    .option(
      "--keepalive <seconds>",
      "the devices' persistent keepalive, 0 (none) to 3600",
      wholeNumber,
    )
    .addHelpText(
      "after",
      "\nConfigs downloaded before a change keep the old values: download them again.\n",
    )
    .action(async (
      options: JsonOption & {
        subnet?: string;
        listenPort?: number;
        endpointHost?: string;
        mtu?: number;
        keepalive?: number;
      },
    ) => {
      const client = await connect();
      const body = {
        subnet: options.subnet,
        listen_port: options.listenPort,
        endpoint_host: options.endpointHost === undefined
          ? undefined
          : options.endpointHost.trim() === ""
          ? null
          : options.endpointHost,
        mtu: options.mtu,
        persistent_keepalive_seconds: options.keepalive,
      };
      const change = Object.values(body).some((value) => value !== undefined);
      const settings = change
        ? await client.request<WireguardSettings>("PUT", SETTINGS, { body })
        : await client.request<WireguardSettings>("GET", SETTINGS);
      emit(outputOf(options), settings, () => {
        if (change) line(`${pc.green("Updated")} the WireGuard settings.`);
        printSettings(settings);
      });
    });

  leaf(
    wireguard,
    "rotate-key",
    "Make a new server key pair: every device config becomes invalid (admins)",
    ["octoprox wireguard rotate-key", "octoprox wireguard rotate-key --yes"],
  )
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const sure = await confirm(
        "Rotate the WireGuard server key? Every device config becomes invalid until it is " +
          "downloaded again.",
        options.yes,
      );
      if (!sure) {
        line("Nothing changed.");
        return;
      }
      const settings = await client.request<WireguardSettings>("POST", `${SETTINGS}/rotate-key`);
      note(pc.yellow(`${SERVER_KEY_ROTATED}: download each device's config again.`));
      emit(outputOf(options), settings, () => {
        line(`${pc.green("Rotated")} the server key; its public key is ${settings.public_key}.`);
      });
    });
}
