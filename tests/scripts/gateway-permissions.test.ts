/**
 * The gateway's Deno permissions grant running programs only to a gateway with a tunnel
 * endpoint turned on (WireGuard's or OpenVPN's, read as the settings read a flag), and then
 * exactly the tunnel programs, OpenVPN's daemon among them.
 */
import { describe, expect, it } from "vitest";
import { gatewayCheckoutPermissions, runsTunnels } from "../../scripts/gateway-command.ts";

const allowRun = (env: Record<string, string>) =>
  gatewayCheckoutPermissions(env).filter((flag) => flag.startsWith("--allow-run"));

describe("the gateway's permission to run programs", () => {
  it("is none without a tunnel endpoint", () => {
    expect(runsTunnels({})).toBe(false);
    expect(runsTunnels({ OCTOPROX_WIREGUARD_ENABLED: "false", OCTOPROX_OPENVPN_ENABLED: "0" }))
      .toBe(false);
    expect(allowRun({})).toEqual([]);
  });

  it("is the tunnel programs with either endpoint on", () => {
    const programs = ["--allow-run=ip,wg,nft,wireguard-go,conntrack,openvpn"];
    expect(allowRun({ OCTOPROX_WIREGUARD_ENABLED: "true" })).toEqual(programs);
    expect(allowRun({ OCTOPROX_OPENVPN_ENABLED: " Yes " })).toEqual(programs);
  });
});
