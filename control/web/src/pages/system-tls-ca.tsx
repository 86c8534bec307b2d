/**
 * The System page's TLS interception CA, from GET /system/tls-ca: the certificate the api hands
 * to clients (its subject, end, days left, SPKI hash and file), marked when it expires within
 * the warning days (the gateways warn in their log then too), or why its file cannot serve.
 * Read every minute: days move slowly.
 */
import type { TlsCaCertificate, TlsCaStatus } from "../../../api/answers/tls-ca.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const REFRESH_MS = 60_000;

export function TlsCa() {
  const status = useApi<TlsCaStatus>("/system/tls-ca", undefined, REFRESH_MS);
  const data = status.data;
  return (
    <section aria-label="TLS interception CA">
      <h3>TLS interception CA</h3>
      <ErrorNote error={status.error} />
      {data ? <CaBody status={data} /> : null}
    </section>
  );
}

function CaBody({ status }: { status: TlsCaStatus }) {
  if (!status.configured) {
    return (
      <p class="warning-text" data-tls-ca="none">
        No CA: the api was not given OCTOPROX_TLS_MITM_CA_CERT_PATH, and gateways do not start
        without one.
      </p>
    );
  }
  if (status.error !== null) {
    return <div class="form-error" role="alert" data-tls-ca="error">{status.error}</div>;
  }
  return (
    <table class="data" aria-label="TLS interception CA">
      <thead>
        <tr>
          <th>Subject</th>
          <th>Not after</th>
          <th>Days left</th>
          <th>SPKI SHA-256</th>
          <th>File</th>
        </tr>
      </thead>
      <tbody>
        {status.current ? <CaRow ca={status.current} warningDays={status.warning_days} /> : null}
      </tbody>
    </table>
  );
}

function CaRow({ ca, warningDays }: { ca: TlsCaCertificate; warningDays: number }) {
  return (
    <tr data-tls-ca="current" class={ca.expires_soon ? "failing" : undefined}>
      <td>{ca.subject}</td>
      <td>
        <Time value={ca.not_after} />
      </td>
      <td data-days-left>
        {ca.days_left}
        {ca.expires_soon
          ? (
            <span class="badge warning" title={`Within ${warningDays} days of its end`}>
              expires soon: rotate it
            </span>
          )
          : null}
      </td>
      <td>
        <code data-spki>{ca.spki_sha256}</code>
      </td>
      <td>
        <code>{ca.path}</code>
      </td>
    </tr>
  );
}
