/**
 * `openvpn settings|rotate-identity`: the install's OpenVPN settings (the device subnet, the
 * transport, port and host devices dial, the MTU and keepalive) and its identity (the CA, the
 * server certificate and the tls-crypt key). Anyone reads them; changes and the rotation are the
 * admins'. No key is ever shown; the CA's certificate is, with `--ca` alone.
 */
import { Option } from "commander";
import type { Command } from "commander";
import { OPENVPN_IDENTITY_ROTATED, type OpenvpnSettings } from "../../api/answers/openvpn.ts";
import { connect, type JsonOption, leaf, outputOf, positiveInteger } from "../command.ts";
import { emit, line, note, pc, printFields } from "../output.ts";
import { confirm } from "../prompt.ts";

const SETTINGS = "/openvpn/settings";

function printSettings(settings: OpenvpnSettings): void {
  printFields([
    ["Subnet", settings.subnet],
    ["Gateway address", `${settings.gateway_address} (the devices' DNS)`],
    ["Transport", settings.transport.toUpperCase()],
    ["Listen port", settings.listen_port],
    [
      "Endpoint host",
      settings.endpoint_host ?? pc.yellow("not set: no device profile until it is"),
    ],
    ["MTU", settings.mtu],
    [
      "Keepalive",
      `every ${settings.keepalive_interval_seconds} s, ` +
      `timeout ${settings.keepalive_timeout_seconds} s`,
    ],
    ["Updated", settings.updated_at],
  ]);
  note(pc.dim("The CA certificate: octoprox openvpn settings --ca"));
}

export function registerOpenvpn(program: Command): void {
  const openvpn = program.command("openvpn").description(
    "The install's OpenVPN settings and identity (devices: octoprox devices --protocol openvpn)",
  );

  leaf(openvpn, "settings", "Show the OpenVPN settings, or change them (admins)", [
    "octoprox openvpn settings",
    "octoprox openvpn settings --endpoint-host vpn.example.com --transport tcp --listen-port 443",
    "octoprox openvpn settings --ca > octoprox-ca.pem",
  ])
    .option("--subnet <cidr>", "the devices' IPv4 block, /8 to /29, apart from WireGuard's")
    .addOption(
      new Option("--transport <transport>", "UDP or TCP, one for every device").choices([
        "udp",
        "tcp",
      ]),
    )
    .option("--listen-port <port>", "the port devices dial", positiveInteger)
    .option("--endpoint-host <host>", 'the host name or address devices dial ("" unsets it)')
    .option("--mtu <bytes>", "the tunnel's MTU, 576 to 1500", positiveInteger)
    .option("--keepalive-interval <seconds>", "a ping every this often, 1 to 600", positiveInteger)
    .option(
      "--keepalive-timeout <seconds>",
      "a session silent this long is ended, at least twice the interval",
      positiveInteger,
    )
    .option("--ca", "print the CA's certificate (PEM) alone")
    .addHelpText(
      "after",
      "\nProfiles downloaded before a change of transport, port or host keep the old values:\n" +
        "download them again (octoprox devices config <device> --project <project>).\n",
    )
    .action(async (
      options: JsonOption & {
        subnet?: string;
        transport?: string;
        listenPort?: number;
        endpointHost?: string;
        mtu?: number;
        keepaliveInterval?: number;
        keepaliveTimeout?: number;
        ca?: boolean;
      },
    ) => {
      const client = await connect();
      const body = {
        subnet: options.subnet,
        transport: options.transport,
        listen_port: options.listenPort,
        endpoint_host: options.endpointHost === undefined
          ? undefined
          : options.endpointHost.trim() === ""
          ? null
          : options.endpointHost,
        mtu: options.mtu,
        keepalive_interval_seconds: options.keepaliveInterval,
        keepalive_timeout_seconds: options.keepaliveTimeout,
      };
      const change = Object.values(body).some((value) => value !== undefined);
      const settings = change
        ? await client.request<OpenvpnSettings>("PUT", SETTINGS, { body })
        : await client.request<OpenvpnSettings>("GET", SETTINGS);
      if (options.ca && !options.json) {
        process.stdout.write(settings.ca_certificate.trim() + "\n");
        return;
      }
      emit(outputOf(options), settings, () => {
        if (change) line(`${pc.green("Updated")} the OpenVPN settings.`);
        printSettings(settings);
      });
    });

  leaf(
    openvpn,
    "rotate-identity",
    "Make a new CA, server certificate and tls-crypt key: every profile becomes invalid (admins)",
    ["octoprox openvpn rotate-identity", "octoprox openvpn rotate-identity --yes"],
  )
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const sure = await confirm(
        "Rotate the OpenVPN identity? Every device gets a new certificate, and every profile " +
          "becomes invalid until it is downloaded again.",
        options.yes,
      );
      if (!sure) {
        line("Nothing changed.");
        return;
      }
      const settings = await client.request<OpenvpnSettings>(
        "POST",
        `${SETTINGS}/rotate-identity`,
      );
      note(pc.yellow(`${OPENVPN_IDENTITY_ROTATED}: download each device's profile again.`));
      emit(outputOf(options), settings, () => {
        line(`${pc.green("Rotated")} the OpenVPN identity.`);
      });
    });
}
