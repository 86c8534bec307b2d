/**
 * The System page's TLS interception CA, from GET /system/tls-ca: the certificate the api hands
 * to clients (its subject, end, days left, SPKI hash and file), marked when it expires within
 * the warning days (the gateways warn in their log then too), or why its file cannot serve;
 * after a rotation, the previous CA beside it while the overlap lasts, and when that ends.
 * Read every minute: days move slowly.
 */
import type { TlsCaCertificate, TlsCaRotation, TlsCaStatus } from "../../../api/answers/tls-ca.ts";
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
  const rotation = status.rotation;
  return (
    <>
      {status.error !== null
        ? <div class="form-error" role="alert" data-tls-ca="error">{status.error}</div>
        : null}
      {rotation ? <RotationNote rotation={rotation} /> : null}
      {rotation?.error ? <div class="form-error" role="alert">{rotation.error}</div> : null}
      {status.current || rotation?.previous ? <CaTable status={status} /> : null}
    </>
  );
}

function RotationNote({ rotation }: { rotation: TlsCaRotation }) {
  return rotation.in_overlap
    ? (
      <p data-rotation="overlap">
        Rotated: until <Time value={rotation.overlap_until} />{" "}
        the download holds both CAs and gateways that start sign with the previous one; from then
        on, gateways that start sign with the current one.
      </p>
    )
    : (
      <p class="muted" data-rotation="ended">
        The rotation's overlap ended{" "}
        <Time value={rotation.overlap_until} />: gateways started since sign with the current CA,
        and the previous CA's settings can go.
      </p>
    );
}

function CaTable({ status }: { status: TlsCaStatus }) {
  const previous = status.rotation?.in_overlap ? status.rotation.previous : null;
  return (
    <table class="data" aria-label="TLS interception CA">
      <thead>
        <tr>
          <th>CA</th>
          <th>Subject</th>
          <th>Not after</th>
          <th>Days left</th>
          <th>SPKI SHA-256</th>
          <th>File</th>
        </tr>
      </thead>
      <tbody>
        {status.current
          ? (
            <CaRow
              ca={status.current}
              which="current"
              signing={status.signing === "current"}
              warningDays={status.warning_days}
            />
          )
          : null}
        {previous
          ? (
            <CaRow
              ca={previous}
              which="previous"
              signing={status.signing === "previous"}
              warningDays={status.warning_days}
            />
          )
          : null}
      </tbody>
    </table>
  );
}

function CaRow(
  { ca, which, signing, warningDays }: {
    ca: TlsCaCertificate;
    which: "current" | "previous";
    signing: boolean;
    warningDays: number;
  },
) {
  return (
    <tr data-tls-ca={which} class={ca.expires_soon ? "failing" : undefined}>
      <td>
        {which}
        {signing
          ? (
            <span class="badge ok" title="What a gateway that starts now signs with">
              signs
            </span>
          )
          : null}
      </td>
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
