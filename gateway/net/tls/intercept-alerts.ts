/** The TLS alert a client sent, named from whichever TLS engine reported it. */

/**
 * The alert a client sent, from the TLS engine's error: OpenSSL says `tlsv1 alert unknown ca`
 * (code ERR_SSL_TLSV1_ALERT_UNKNOWN_CA), rustls `received fatal alert: UnknownCA`.
 */
export function alertName(error: unknown): string | undefined {
  const text = error instanceof Error
    ? `${(error as { code?: string }).code ?? ""} ${error.message}`
    : String(error);
  const openssl = /ALERT_([A-Z_]+)/.exec(text) ?? /alert ([a-z ]+)/i.exec(text);
  if (openssl !== null && !/^received fatal/i.test(openssl[0])) {
    return openssl[1].trim().toLowerCase().replaceAll(" ", "_");
  }
  const rustls = /fatal alert: ?([A-Za-z]+)/.exec(text);
  if (rustls !== null) {
    return rustls[1].replace(/([a-z])([A-Z])/g, "$1_$2").replace(/([A-Z])([A-Z][a-z])/g, "$1_$2")
      .toLowerCase();
  }
  return undefined;
}
