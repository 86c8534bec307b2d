/**
 * The `octoprox` command tree. Commander's exits are turned into errors (exitOverride) so
 * main.ts decides every exit status: 0 done, 1 failed, 2 used wrong.
 */
import { readFileSync } from "node:fs";
import { Command } from "commander";
import { examplesText } from "./command.ts";
import { registerAuth } from "./commands/auth.ts";
import { registerBackup } from "./commands/backup.ts";
import { registerConfig } from "./commands/config.ts";
import { registerConnectors } from "./commands/connectors.ts";
import { registerDevices } from "./commands/devices.ts";
import { registerDistributionKeys } from "./commands/distribution-keys.ts";
import { registerExits } from "./commands/exits.ts";
import { registerExtract } from "./commands/extract.ts";
import { registerGeo } from "./commands/geo.ts";
import { registerInspect } from "./commands/inspect.ts";
import { registerDomains } from "./commands/domains.ts";
import { registerAudit } from "./commands/audit.ts";
import { registerAlerts } from "./commands/alerts.ts";
import { registerProjects } from "./commands/projects.ts";
import { registerProxies } from "./commands/proxies.ts";
import { registerStatus } from "./commands/status.ts";
import { registerTokens } from "./commands/tokens.ts";
import { registerUsage } from "./commands/usage.ts";
import { registerProviders } from "./commands/providers.ts";
import { registerSequence } from "./commands/sequence.ts";
import { registerUsers } from "./commands/users.ts";
import { registerOpenvpn } from "./commands/openvpn.ts";
import { registerWireguard } from "./commands/wireguard.ts";

export function buildProgram(): Command {
  const program = new Command("octoprox")
    .description(
      "Manage an Octoprox install through its admin API.\n" +
        "Log in once with `octoprox login <url>`; OCTOPROX_URL and OCTOPROX_TOKEN override the stored login.",
    )
    .version(packageVersion())
    // Inherited by every command added below: commander throws instead of exiting.
    .exitOverride()
    .showHelpAfterError("(add --help for usage)")
    .configureOutput({ writeErr: (text) => process.stderr.write(text) })
    .addHelpText(
      "after",
      examplesText([
        "octoprox login http://127.0.0.1:8000",
        "octoprox status",
        "octoprox projects list --json",
        "octoprox proxies import proxies.txt --project shop --connector main",
        "octoprox apply -f octoprox.yaml",
      ]) + "\nExit status: 0 done, 1 failed (an API error, an unreachable API), 2 bad usage.\n",
    );
  registerAuth(program);
  registerStatus(program);
  registerProjects(program);
  registerConnectors(program);
  registerSequence(program);
  registerProxies(program);
  registerDevices(program);
  registerUsage(program);
  registerInspect(program);
  registerDomains(program);
  registerAudit(program);
  registerAlerts(program);
  registerTokens(program);
  registerDistributionKeys(program);
  registerExtract(program);
  registerProviders(program);
  registerGeo(program);
  registerExits(program);
  registerWireguard(program);
  registerOpenvpn(program);
  registerUsers(program);
  registerConfig(program);
  registerBackup(program);
  for (const command of program.commands) {
    // A group's own help lists its commands and how to reach their examples.
    if (command.commands.length > 0) {
      command.addHelpText(
        "after",
        examplesText(
          command.commands.slice(0, 2).map((sub) =>
            `octoprox ${command.name()} ${sub.name()} --help`
          ),
        ),
      );
    }
  }
  return program;
}

/** The checkout's version, from its package.json. */
function packageVersion(): string {
  const text = readFileSync(new URL("../../package.json", import.meta.url), "utf8");
  return (JSON.parse(text) as { version: string }).version;
}
