/**
 * The TLS interception CA's settings: the gateway takes the certificate's and the key's paths
 * together or neither (one alone names both variables); the control plane reads the
 * certificate's path alone, since the api answers the certificate and never reads the key.
 * After a rotation, the previous CA's settings and the overlap's end go together (its key for
 * gateways alone), only beside the current CA's, the end a time with its zone.
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

describe("a rotation's settings", () => {
  const ca = {
    OCTOPROX_TLS_MITM_CA_CERT_PATH: "/ca/ca.pem",
    OCTOPROX_TLS_MITM_CA_KEY_PATH: "/ca/ca-key.pem",
  };
  const previous = {
    OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: "/ca/ca.previous.pem",
    OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH: "/ca/ca-key.previous.pem",
    OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: "2027-01-04T00:00:00Z",
  };
  const control = {
    OCTOPROX_DATABASE_URL: "postgres://127.0.0.1:1/none",
    OCTOPROX_REDIS_URL: "redis://127.0.0.1:1",
    OCTOPROX_INTERNAL_SECRET: "i".repeat(32),
    OCTOPROX_JWT_SECRET: "j".repeat(32),
  };
  const together = "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH, " +
    "OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH and OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL must be set " +
    "together";

  test("are taken by a gateway all three together, the end as milliseconds", () => {
    const settings = parseGatewaySettings({ ...gatewayBase, ...ca, ...previous });
    expect([
      settings.tlsMitmCaPreviousCertPath,
      settings.tlsMitmCaPreviousKeyPath,
      settings.tlsMitmCaOverlapUntilMs,
    ]).toEqual(["/ca/ca.previous.pem", "/ca/ca-key.previous.pem", Date.UTC(2027, 0, 4)]);
    const offset = parseGatewaySettings({
      ...gatewayBase,
      ...ca,
      ...previous,
      OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: "2027-01-04T01:30+01:30",
    });
    expect(offset.tlsMitmCaOverlapUntilMs).toBe(Date.UTC(2027, 0, 4));
  });

  test("are refused by a gateway one without the others, or without the current CA", () => {
    for (const name of Object.keys(previous)) {
      const one = { ...gatewayBase, ...ca, ...previous, [name]: "" };
      expect(() => parseGatewaySettings(one)).toThrow(new SettingsError(undefined, together));
    }
    expect(() => parseGatewaySettings({ ...gatewayBase, ...previous })).toThrow(
      /OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH needs OCTOPROX_TLS_MITM_CA_CERT_PATH/,
    );
  });

  test("want the overlap's end as a time with its zone", () => {
    for (const bad of ["2027-01-04", "2027-01-04T00:00:00", "next week", "2027-13-40T00:00Z"]) {
      expect(() =>
        parseGatewaySettings({
          ...gatewayBase,
          ...ca,
          ...previous,
          OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: bad,
        })
      ).toThrow(
        "OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL must be a time in ISO 8601 with its zone, such as " +
          "2027-01-04T00:00:00Z",
      );
    }
  });

  test("are the certificate's and the end for the control plane, together", () => {
    const settings = parseControlSettings({
      ...control,
      OCTOPROX_TLS_MITM_CA_CERT_PATH: "/ca/ca.pem",
      OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: "/ca/ca.previous.pem",
      OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: "2027-01-04T00:00:00Z",
    });
    expect([settings.tlsMitmCaPreviousCertPath, settings.tlsMitmCaOverlapUntilMs]).toEqual([
      "/ca/ca.previous.pem",
      Date.UTC(2027, 0, 4),
    ]);
    expect(() =>
      parseControlSettings({
        ...control,
        OCTOPROX_TLS_MITM_CA_CERT_PATH: "/ca/ca.pem",
        OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: "/ca/ca.previous.pem",
      })
    ).toThrow(
      "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH and OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL must be set " +
        "together",
    );
    expect(() =>
      parseControlSettings({
        ...control,
        OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: "/ca/ca.previous.pem",
        OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: "2027-01-04T00:00:00Z",
      })
    ).toThrow(/needs OCTOPROX_TLS_MITM_CA_CERT_PATH/);
  });
});
