/**
 * The TLS interception CA's settings: the gateway takes the certificate's and the key's paths
 * together or neither (one alone names both variables); the control plane reads the
 * certificate's path alone, since the api answers the certificate and never reads the key.
 */
import { describe, expect, test } from "vitest";
import {
  parseControlSettings,
  parseGatewaySettings,
  SettingsError,
} from "../../shared/settings.ts";

const gatewayBase = {
  OCTOPROX_REDIS_URL: "redis://127.0.0.1:1",
  OCTOPROX_INTERNAL_SECRET: "x".repeat(32),
};

describe("the gateway's CA paths", () => {
  test("are unset by default, and taken as given together", () => {
    const none = parseGatewaySettings(gatewayBase);
    expect([none.tlsMitmCaCertPath, none.tlsMitmCaKeyPath]).toEqual([undefined, undefined]);
    const both = parseGatewaySettings({
      ...gatewayBase,
      OCTOPROX_TLS_MITM_CA_CERT_PATH: " /ca/ca.pem ",
      OCTOPROX_TLS_MITM_CA_KEY_PATH: "/ca/ca-key.pem",
    });
    expect([both.tlsMitmCaCertPath, both.tlsMitmCaKeyPath]).toEqual([
      "/ca/ca.pem",
      "/ca/ca-key.pem",
    ]);
  });

  test("one without the other is refused, naming both", () => {
    for (const one of ["OCTOPROX_TLS_MITM_CA_CERT_PATH", "OCTOPROX_TLS_MITM_CA_KEY_PATH"]) {
      expect(() => parseGatewaySettings({ ...gatewayBase, [one]: "/ca/file.pem" })).toThrow(
        new SettingsError(
          undefined,
          "OCTOPROX_TLS_MITM_CA_CERT_PATH and OCTOPROX_TLS_MITM_CA_KEY_PATH must be set together",
        ),
      );
    }
  });
});

describe("the control plane's", () => {
  test("is the certificate's path alone", () => {
    const settings = parseControlSettings({
      OCTOPROX_DATABASE_URL: "postgres://127.0.0.1:1/none",
      OCTOPROX_REDIS_URL: "redis://127.0.0.1:1",
      OCTOPROX_INTERNAL_SECRET: "i".repeat(32),
      OCTOPROX_JWT_SECRET: "j".repeat(32),
      OCTOPROX_TLS_MITM_CA_CERT_PATH: "/ca/ca.pem",
    });
    expect(settings.tlsMitmCaCertPath).toBe("/ca/ca.pem");
    expect("tlsMitmCaKeyPath" in settings).toBe(false);
  });
});
