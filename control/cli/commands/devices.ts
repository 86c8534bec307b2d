/**
 * `devices list|show|usage|add|edit|remove|config|rotate-keys`: a project's tunnel devices,
 * WireGuard and OpenVPN alike (docs/tunnels.md), and what they carried. A device is named by its
 * name or id within `--project`, found among both protocols (`--protocol` settles a name both
 * have); `add` takes `--protocol` (WireGuard unless said). Its keys are secrets: only `config`
 * writes them (a `.conf` or an `.ovpn`, to a file or to stdout when asked), no other output
 * shows more than the API's masks.
 */
import { rename, rm } from "node:fs/promises";
import type { Command } from "commander";
import { Option } from "commander";
import type { Device as WireguardDevice } from "../../api/answers/wireguard.ts";
import type { OpenvpnDevice } from "../../api/answers/openvpn.ts";
import type { Series } from "../../api/answers/metrics.ts";
import type { Client } from "../client.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { CliError, UsageError } from "../errors.ts";
import {
  type Cell,
  emit,
  formatBytes,
  formatCount,
  line,
  note,
  pc,
  printFields,
  printJson,
  printTable,
} from "../output.ts";
import { printHistory, rangeOption, usageFields } from "./usage.ts";
import { confirm } from "../prompt.ts";
import { type Named, pick, resolveProject } from "../resolve.ts";
import { saveBody } from "../streams.ts";

interface ProjectOption extends JsonOption {
  project: string;
}

/** The options a device is routed with, as the API's body names them. */
interface OptionFlags {
  country?: string;
  state?: string;
  city?: string;
  session?: string;
}

type Device = WireguardDevice | OpenvpnDevice;

const PROTOCOLS = ["wireguard", "openvpn"] as const;
type Protocol = (typeof PROTOCOLS)[number];

interface ProtocolOption {
  protocol?: Protocol;
}

const projectOption = ["-p, --project <project>", "the project (name or id)"] as const;

const protocolOption = () =>
  new Option("--protocol <protocol>", "only a device of this tunnel").choices(PROTOCOLS);

const peersOf = (project: Named, protocol: string = "wireguard") =>
  `/projects/${project.id}/${protocol}/peers`;

/** The path of a device's own routes. */
const deviceUrl = (project: Named, device: Device) =>
  `${peersOf(project, device.protocol)}/${device.id}`;

const isOpenvpn = (device: Device): device is OpenvpnDevice => device.protocol === "openvpn";

/** A project's devices of `protocol`, or of both (WireGuard's first). */
async function listDevices(client: Client, project: Named, protocol?: Protocol): Promise<Device[]> {
  const lists = await Promise.all(
    (protocol === undefined ? PROTOCOLS : [protocol]).map((p) =>
      client.request<Device[]>("GET", peersOf(project, p))
    ),
  );
  return lists.flat();
}

async function resolveDevice(
  client: Client,
  project: Named,
  ref: string,
  protocol?: Protocol,
): Promise<Device> {
  const devices = await listDevices(client, project, protocol);
  return pick(devices, ref, (device) => device.name, "device");
}

function withOptionFlags(command: Command): Command {
  return command
    .option("--country <code>", 'the country its connections ask for ("" clears)')
    .option("--state <code>", 'the state or region, within the country ("" clears)')
    .option("--city <name>", 'the city, within the country ("" clears)')
    .option("--session <id>", 'a sticky session id: one exit for all it does ("" clears)');
}

function optionBody(options: OptionFlags): Record<string, unknown> {
  return {
    country: options.country,
    state: options.state,
    city: options.city,
    session_id: options.session,
  };
}

/** A name as a shell takes it back: quoted when it holds more than letters, digits, `._-`. */
function shellWord(text: string): string {
  return /^[\w.-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

function enabledText(device: Device): string {
  return device.enabled ? pc.green("yes") : pc.dim("no");
}

/** Whether it handshook with a gateway within the last 3 minutes. */
function onlineText(device: Device): string {
  return device.online ? pc.green("yes") : pc.dim("no");
}

const protocolName = (device: Device) => isOpenvpn(device) ? "OpenVPN" : "WireGuard";

function printDevices(list: readonly Device[], projectNames?: Map<string, string>): void {
  const head = [
    "Name",
    "Tunnel",
    "Address",
    "Country",
    "State",
    "City",
    "Session",
    "Enabled",
    "Online",
    "Last seen",
    "Requests",
    "Sent",
    "Received",
    "Id",
  ];
  printTable(
    projectNames ? ["Project", ...head] : head,
    list.map((device) => {
      const row = [
        device.name,
        protocolName(device),
        device.address,
        device.country,
        device.state,
        device.city,
        device.session_id,
        enabledText(device),
        onlineText(device),
        device.last_seen_at ?? pc.dim("never"),
        formatCount(device.usage.requests),
        formatBytes(device.usage.bytes_sent),
        formatBytes(device.usage.bytes_received),
        device.id,
      ];
      return projectNames
        ? [projectNames.get(device.project_id) ?? device.project_id, ...row]
        : row;
    }),
    projectNames
      ? "No device in any project."
      : "No device yet: octoprox devices add <name> --project <project>",
  );
}

/** A device's usage, and the encrypted DNS connections the gateways closed for it. */
function deviceUsageFields(device: Device): [string, Cell][] {
  return [
    ...usageFields(device.usage),
    ["Encrypted DNS closed", formatCount(device.usage.encrypted_dns_closed)],
  ];
}

/** Where a device's keys are: never the keys themselves. */
function keyFields(device: Device): [string, Cell][] {
  if (isOpenvpn(device)) {
    return [
      ["Certificate serial", device.certificate_serial],
      ["Private key", "kept by the server, in the profile"],
    ];
  }
  return [
    ["Public key", device.public_key],
    [
      "Private key",
      device.has_private_key
        ? "kept by the server, in the config"
        : "the device's own (not in the config)",
    ],
  ];
}

function printDevice(device: Device): void {
  printFields([
    ["Name", device.name],
    ["Id", device.id],
    ["Tunnel", protocolName(device)],
    ["Address", device.address],
    ["Enabled", enabledText(device)],
    ["Online", onlineText(device)],
    ["Country", device.country],
    ["State", device.state],
    ["City", device.city],
    ["Session", device.session_id],
    ["Last seen", device.last_seen_at ?? pc.dim("never")],
    ...deviceUsageFields(device),
    ...keyFields(device),
    ["Created", device.created_at],
  ]);
}

/** The file a device's config is saved as: a WireGuard `.conf`, an OpenVPN `.ovpn`. */
const configFile = (device: Device) => `${device.name}.${isOpenvpn(device) ? "ovpn" : "conf"}`;

/** Where to find the device's config, after a command that makes or changes its keys. */
function configHint(device: Device, project: Named): void {
  note(
    pc.dim(
      `Its config: octoprox devices config ${shellWord(device.name)} --project ` +
        `${shellWord(project.name)} --output ${shellWord(configFile(device))}`,
    ),
  );
}

export function registerDevices(program: Command): void {
  const devices = program.command("devices").description(
    "WireGuard and OpenVPN devices: phones and laptops routed through a project's pool",
  );

  leaf(devices, "list", "List a project's devices, or every project's", [
    "octoprox devices list --project phones",
    "octoprox devices list",
    "octoprox devices list -p phones --json",
  ])
    .option("-p, --project <project>", "only this project's (name or id); all without it")
    .addOption(protocolOption())
    .action(async (options: JsonOption & ProtocolOption & { project?: string }) => {
      const client = await connect();
      if (options.project !== undefined) {
        const project = await resolveProject(client, options.project);
        const list = await listDevices(client, project, options.protocol);
        emit(outputOf(options), list, () => printDevices(list));
        return;
      }
      const projects = await client.request<Named[]>("GET", "/projects");
      const list: Device[] = [];
      for (const project of projects) {
        list.push(...await listDevices(client, project, options.protocol));
      }
      emit(
        outputOf(options),
        list,
        () => printDevices(list, new Map(projects.map((p) => [p.id, p.name]))),
      );
    });

  leaf(devices, "show <device>", "Show a device (by name or id)", [
    "octoprox devices show pixel --project phones",
  ])
    .requiredOption(...projectOption)
    .addOption(protocolOption())
    .action(async (ref: string, options: ProjectOption & ProtocolOption) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const device = await resolveDevice(client, project, ref, options.protocol);
      emit(outputOf(options), device, () => printDevice(device));
    });

  leaf(
    devices,
    "usage <device>",
    "Show what a device carried: all-time totals and its requests over a range",
    [
      "octoprox devices usage pixel --project phones",
      "octoprox devices usage pixel -p phones --range 7d",
      "octoprox devices usage pixel -p phones --json | jq .device.usage.bytes_received",
    ],
  )
    .requiredOption(...projectOption)
    .addOption(protocolOption())
    .addOption(rangeOption())
    .action(async (ref: string, options: ProjectOption & ProtocolOption & { range: string }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const device = await resolveDevice(client, project, ref, options.protocol);
      const history = await client.request<Series>(
        "GET",
        `${deviceUrl(project, device)}/metrics/history`,
        { query: { range: options.range } },
      );
      emit(outputOf(options), { device, history }, () => {
        line(`${pc.bold(device.name)} (${device.address}): usage since the start`);
        printFields(deviceUsageFields(device));
        if (!device.usage.live_included) {
          note(pc.dim("Without what gateways counted since the last flush: Redis did not answer."));
        }
        line();
        printHistory(history);
      });
    });

  withOptionFlags(
    leaf(devices, "add <name>", "Add a device: the server makes its keys unless given one", [
      "octoprox devices add pixel --project phones",
      "octoprox devices add laptop -p phones --country de --city berlin --session 42",
      "octoprox devices add tablet -p phones --public-key 'q6Rv…=' # its private key stays on it",
      "octoprox devices add desk -p phones --protocol openvpn",
    ]),
  )
    .requiredOption(...projectOption)
    .addOption(
      new Option("--protocol <protocol>", "the tunnel it joins over").choices(PROTOCOLS).default(
        "wireguard",
      ),
    )
    .option(
      "--public-key <key>",
      "WireGuard: the device's own public key (wg pubkey); its private key stays",
    )
    .option("--disabled", "add it without letting it connect yet")
    .action(async (
      name: string,
      options: ProjectOption & OptionFlags & {
        protocol: Protocol;
        publicKey?: string;
        disabled?: boolean;
      },
    ) => {
      if (options.protocol === "openvpn" && options.publicKey !== undefined) {
        throw new UsageError(
          "--public-key is WireGuard's: an OpenVPN device's key and certificate are the server's.",
        );
      }
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const device = await client.request<Device>("POST", peersOf(project, options.protocol), {
        body: {
          name,
          enabled: options.disabled ? false : undefined,
          public_key: options.publicKey,
          ...optionBody(options),
        },
      });
      emit(outputOf(options), device, () => {
        line(`${pc.green("Added")} device ${device.name} at ${device.address}.`);
        printDevice(device);
        configHint(device, project);
      });
    });

  withOptionFlags(
    leaf(devices, "edit <device>", "Change a device's name, options, or whether it connects", [
      "octoprox devices edit pixel -p phones --country us --state ca",
      "octoprox devices edit pixel -p phones --city '' --session ''",
      "octoprox devices edit pixel -p phones --disable",
    ]),
  )
    .requiredOption(...projectOption)
    .addOption(protocolOption())
    .option("--name <name>", "a new name")
    .option("--enable", "let it connect")
    .option("--disable", "refuse it at every gateway (it stays listed)")
    .action(async (
      ref: string,
      options: ProjectOption & ProtocolOption & OptionFlags & {
        name?: string;
        enable?: boolean;
        disable?: boolean;
      },
    ) => {
      if (options.enable && options.disable) {
        throw new UsageError("Give --enable or --disable, not both.");
      }
      const body = Object.fromEntries(
        Object.entries({
          name: options.name,
          enabled: options.enable ? true : options.disable ? false : undefined,
          ...optionBody(options),
        }).filter(([, value]) => value !== undefined),
      );
      if (Object.keys(body).length === 0) {
        throw new UsageError("Nothing to change: give a field to set (see --help).");
      }
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const current = await resolveDevice(client, project, ref, options.protocol);
      const device = await client.request<Device>("PATCH", deviceUrl(project, current), {
        body,
      });
      emit(outputOf(options), device, () => {
        line(`${pc.green("Updated")} device ${device.name}.`);
        printDevice(device);
      });
    });

  leaf(devices, "remove <device>", "Remove a device: its config stops working", [
    "octoprox devices remove pixel --project phones",
    "octoprox devices remove pixel -p phones --yes",
  ])
    .requiredOption(...projectOption)
    .addOption(protocolOption())
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: ProjectOption & ProtocolOption & { yes?: boolean }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const device = await resolveDevice(client, project, ref, options.protocol);
      const sure = await confirm(
        `Remove device ${device.name} (${device.address}) from ${project.name}?`,
        options.yes,
      );
      if (!sure) {
        line("Nothing removed.");
        return;
      }
      await client.request("DELETE", deviceUrl(project, device));
      emit(
        outputOf(options),
        { removed: device },
        () => line(`${pc.green("Removed")} device ${device.name}.`),
      );
    });

  leaf(
    devices,
    "config <device>",
    "Write a device's config: WireGuard's .conf, OpenVPN's .ovpn (it holds the device's keys)",
    [
      "octoprox devices config pixel -p phones --output pixel.conf",
      "octoprox devices config pixel -p phones --qr --output pixel.svg   # a QR code to scan",
      "octoprox devices config pixel -p phones > pixel.conf",
      "octoprox devices config desk -p phones --output desk.ovpn   # an OpenVPN profile",
    ],
  )
    .requiredOption(...projectOption)
    .addOption(protocolOption())
    .option("-o, --output <file>", "write to this file, mode 0600 (stdout otherwise)")
    .option("--qr", "the config as a QR code (SVG) for a phone's WireGuard app; needs --output")
    .addHelpText(
      "after",
      "\nA WireGuard device's file is what wg-quick and the WireGuard apps import; an OpenVPN\n" +
        "device's is the profile OpenVPN clients import (no QR code: it is too large for one).\n" +
        "It holds the device's keys: keep it like a password. The API answers it once an admin\n" +
        "has set the endpoint host (octoprox wireguard|openvpn settings --endpoint-host <host>).\n",
    )
    .action(async (
      ref: string,
      options: ProjectOption & ProtocolOption & { output?: string; qr?: boolean },
    ) => {
      if (options.qr && options.output === undefined) {
        throw new UsageError("--qr writes an SVG file: give --output <file>.");
      }
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const device = await resolveDevice(client, project, ref, options.protocol);
      if (options.qr && isOpenvpn(device)) {
        throw new UsageError("An OpenVPN profile is too large for a QR code: leave out --qr.");
      }
      const path = `${deviceUrl(project, device)}/config`;
      // OpenVPN's route has one format and takes no query.
      const query: Record<string, string> = isOpenvpn(device)
        ? {}
        : { format: options.qr ? "qr" : "conf" };
      if (options.output === undefined) {
        // The file itself is the output; --json wraps it.
        const response = await client.send("GET", path, { query });
        const text = await response.text();
        if (options.json) printJson({ device: device.name, config: text });
        else process.stdout.write(text);
        return;
      }
      const response = await client.send("GET", path, { query });
      // Written aside (0600: it holds keys) and renamed: never half a config at the name.
      const partial = `${options.output}.partial`;
      let bytes: number;
      try {
        bytes = await saveBody(response, partial, () => {});
        await rename(partial, options.output);
      } catch (error) {
        await rm(partial, { force: true });
        throw new CliError(`The config was not written: ${(error as Error).message}`, {
          cause: error,
        });
      }
      emit(
        outputOf(options),
        { file: options.output, format: query.format ?? "ovpn", bytes },
        () =>
          line(
            `${pc.green("Wrote")} ${options.output} (${device.name}'s ${
              options.qr ? "config as a QR code" : isOpenvpn(device) ? "profile" : "config"
            }, ${formatBytes(bytes)}).`,
          ),
      );
    });

  leaf(devices, "rotate-keys <device>", "Give a device new keys: its old config stops working", [
    "octoprox devices rotate-keys pixel --project phones",
    "octoprox devices rotate-keys tablet -p phones --public-key 'q6Rv…=' --yes",
    "octoprox devices rotate-keys desk -p phones   # OpenVPN: a new key and certificate",
  ])
    .requiredOption(...projectOption)
    .addOption(protocolOption())
    .option(
      "--public-key <key>",
      "WireGuard: the device's own new public key (no private key kept)",
    )
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (
      ref: string,
      options: ProjectOption & ProtocolOption & { publicKey?: string; yes?: boolean },
    ) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const current = await resolveDevice(client, project, ref, options.protocol);
      if (isOpenvpn(current) && options.publicKey !== undefined) {
        throw new UsageError(
          "--public-key is WireGuard's: an OpenVPN device's key and certificate are the server's.",
        );
      }
      const sure = await confirm(
        `Give device ${current.name} new keys? The config it has stops working.`,
        options.yes,
      );
      if (!sure) {
        line("Nothing changed.");
        return;
      }
      const device = isOpenvpn(current)
        ? await client.request<Device>("POST", `${deviceUrl(project, current)}/rotate-certificate`)
        : await client.request<Device>(
          "POST",
          `${deviceUrl(project, current)}/rotate-keys`,
          { body: options.publicKey === undefined ? {} : { public_key: options.publicKey } },
        );
      emit(outputOf(options), device, () => {
        line(`${pc.green("Rotated")} the keys of device ${device.name}.`);
        configHint(device, project);
      });
    });
}
