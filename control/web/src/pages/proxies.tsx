/**
 * A project's proxies: a page at a time from the API, sorted and filtered on the server, each
 * row with its usage (the usage API, for the rows shown), its quarantine's countdown and, for
 * editors, Lift and Delete; one proxy added by URL, or a list uploaded as a file with its
 * progress and the lines the API refused.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, type ApiError, upload } from "../api/client.ts";
import type { Page, Usage } from "../../../api/answers/common.ts";
import type { ConnectorSummary } from "../../../api/answers/connectors.ts";
import type { ProxyUsageRow } from "../../../api/answers/metrics.ts";
import type { Proxy, UploadReport } from "../../../api/answers/proxies.ts";
import { PROXY_STATUSES } from "../../../../shared/roles.ts";
import { useSession } from "../session.tsx";
import { formatCount, formatPercent } from "../ui/format.ts";
import { Field, FormError, Select, TextInput } from "../ui/forms.tsx";
import { ProxyCountry } from "../ui/location.tsx";
import { Pager } from "../ui/pager.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

type Sort = "created" | "status" | "country" | "status_changed";
type Direction = "asc" | "desc";

export function Proxies({ projectId }: { projectId: string }) {
  const session = useSession();
  const base = `/projects/${projectId}/proxies`;
  const connectors = useApi<ConnectorSummary[]>(`/projects/${projectId}/connectors`);
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(50);
  const [sort, setSort] = useState<Sort>("created");
  const [direction, setDirection] = useState<Direction>("asc");
  // `?connector=<id>` (a connector's page) opens the list filtered to that connector.
  const { query } = useLocation();
  const [connectorId, setConnectorId] = useState(query.connector ?? "");
  const [status, setStatus] = useState("");
  const [country, setCountry] = useState("");
  const [search, setSearch] = useState("");

  const list = useApi<Page<Proxy>>(base, {
    page,
    page_size: pageSize,
    sort,
    direction,
    connector_id: connectorId,
    status,
    country: country.trim(),
    search: search.trim(),
  }, 15_000);
  const items = list.data?.items ?? [];
  const ids = items.map((item) => item.id).join(",");
  const usage = useApi<Page<ProxyUsageRow>>(
    ids ? `/projects/${projectId}/metrics/proxies` : null,
    { ids, page_size: items.length },
  );
  const usageById = useMemo(
    () => new Map((usage.data?.items ?? []).map((row) => [row.proxy_id, row.usage])),
    [usage.data],
  );
  const names = useMemo(
    () => new Map((connectors.data ?? []).map((c) => [c.id, c.name])),
    [connectors.data],
  );
  const statics = (connectors.data ?? []).filter((c) => c.kind === "static");

  // The quarantines count down from the answer's time left, every second.
  const [loadedAt, setLoadedAt] = useState(Date.now());
  const [now, setNow] = useState(Date.now());
  useEffect(() => setLoadedAt(Date.now()), [list.data]);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const elapsed = Math.max(0, Math.floor((now - loadedAt) / 1000));

  const [actionError, setActionError] = useState<ApiError | undefined>();
  const act = async (step: () => Promise<unknown>) => {
    setActionError(undefined);
    try {
      await step();
      list.reload();
    } catch (error) {
      setActionError(error as ApiError);
    }
  };

  const sortBy = (next: Sort) => {
    if (next === sort) setDirection(direction === "asc" ? "desc" : "asc");
    else {
      setSort(next);
      setDirection("asc");
    }
    setPage(1);
  };
  const filter = <T,>(set: (value: T) => void) => (value: T) => {
    set(value);
    setPage(1);
  };
  const total = list.data?.total ?? 0;

  return (
    <section class="proxies">
      {session.canEdit && statics.length > 0
        ? (
          <div class="proxy-tools">
            <AddProxy base={base} connectors={statics} onAdded={list.reload} />
            <UploadProxies base={base} connectors={statics} onDone={list.reload} />
          </div>
        )
        : null}
      {session.canEdit && connectors.data && statics.length === 0
        ? (
          <p class="muted">
            Proxies are added to a static connector; this project has none. A vendor connector's
            rows are kept by its sync.
          </p>
        )
        : null}
      <div class="filters" role="search" aria-label="Proxy filters">
        <Field label="Connector" field="connector_id">
          <Select
            name="filter_connector"
            value={connectorId}
            onChange={filter(setConnectorId)}
            options={[
              ["", "Every connector"],
              ...(connectors.data ?? []).map((c) => [c.id, c.name] as const),
            ]}
          />
        </Field>
        <Field label="Status" field="status">
          <Select
            name="filter_status"
            value={status}
            onChange={filter(setStatus)}
            options={[["", "Any status"], ...PROXY_STATUSES.map((s) => [s, s] as const)]}
          />
        </Field>
        <Field label="Country" field="country">
          <TextInput name="filter_country" value={country} onInput={filter(setCountry)} />
        </Field>
        <Field label="Host contains" field="search">
          <TextInput name="search" type="search" value={search} onInput={filter(setSearch)} />
        </Field>
      </div>
      <ErrorNote error={list.error} />
      <ErrorNote error={actionError} />
      <table class="data proxies-table" aria-label="Proxies">
        <thead>
          <tr>
            <th>Address</th>
            <SortHeader label="Status" sortKey="status" {...{ sort, direction, sortBy }} />
            <SortHeader label="Country" sortKey="country" {...{ sort, direction, sortBy }} />
            <th>Connector</th>
            <th>Quarantine</th>
            <th>Last check</th>
            <SortHeader
              label="Status since"
              sortKey="status_changed"
              {...{ sort, direction, sortBy }}
            />
            <th class="number">Requests</th>
            <th class="number">Success</th>
            <SortHeader label="Created" sortKey="created" {...{ sort, direction, sortBy }} />
            {session.canEdit ? <th>Actions</th> : null}
          </tr>
        </thead>
        <tbody>
          {items.map((proxy) => (
            <ProxyRow
              key={proxy.id}
              proxy={proxy}
              connector={names.get(proxy.connector_id) ?? proxy.connector_id}
              usage={usageById.get(proxy.id)}
              remaining={Math.max(0, proxy.quarantine_remaining_seconds - elapsed)}
              canEdit={session.canEdit}
              onLift={() => act(() => api("POST", `${base}/${proxy.id}/unquarantine`))}
              onDelete={() => act(() => api("DELETE", `${base}/${proxy.id}`))}
            />
          ))}
        </tbody>
      </table>
      {list.data && total === 0 ? <p class="muted">No proxies here.</p> : null}
      <Pager
        page={page}
        pageSize={pageSize}
        total={total}
        noun="proxies"
        onPage={setPage}
        onPageSize={(size) => {
          setPageSize(size);
          setPage(1);
        }}
      />
    </section>
  );
}

function SortHeader(
  { label, sortKey, sort, direction, sortBy }: {
    label: string;
    sortKey: Sort;
    sort: Sort;
    direction: Direction;
    sortBy: (key: Sort) => void;
  },
) {
  const active = sort === sortKey;
  return (
    <th aria-sort={active ? (direction === "asc" ? "ascending" : "descending") : undefined}>
      <button type="button" class="sort" onClick={() => sortBy(sortKey)}>
        {label}
        <span aria-hidden="true">{active ? (direction === "asc" ? " ▲" : " ▼") : ""}</span>
      </button>
    </th>
  );
}

function ProxyRow(
  { proxy, connector, usage, remaining, canEdit, onLift, onDelete }: {
    proxy: Proxy;
    connector: string;
    usage: Usage | undefined;
    remaining: number;
    canEdit: boolean;
    onLift: () => Promise<void>;
    onDelete: () => Promise<void>;
  },
) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const run = (step: () => Promise<void>) => async () => {
    setBusy(true);
    try {
      await step();
    } finally {
      setBusy(false);
    }
  };
  const quarantined = proxy.quarantined && remaining > 0;
  return (
    <tr data-proxy={proxy.id}>
      <td>
        <code>{proxy.url}</code>
      </td>
      <td>
        <span class="badge status" data-status={proxy.status}>{proxy.status}</span>
      </td>
      <td data-country>
        <ProxyCountry proxy={proxy} />
      </td>
      <td>{connector}</td>
      <td>
        {quarantined
          ? (
            <span class="quarantine">
              <span class="badge warning" data-quarantine>
                quarantined {formatCountdown(remaining)}
              </span>
              {canEdit
                ? (
                  <button
                    type="button"
                    class="secondary small"
                    disabled={busy}
                    onClick={run(onLift)}
                  >
                    Lift
                  </button>
                )
                : null}
            </span>
          )
          : <span class="muted">–</span>}
      </td>
      <td>
        <Time value={proxy.last_checked_at} />
      </td>
      <td>
        <Time value={proxy.status_changed_at} />
      </td>
      <td class="number">{formatCount(usage?.requests)}</td>
      <td class="number">{formatPercent(usage?.success_rate)}</td>
      <td>
        <Time value={proxy.created_at} />
      </td>
      {canEdit
        ? (
          <td class="row-actions">
            {confirming
              ? (
                <span>
                  Delete this proxy?{" "}
                  <button
                    type="button"
                    class="danger small"
                    disabled={busy}
                    onClick={run(onDelete)}
                  >
                    Yes, delete
                  </button>{" "}
                  <button
                    type="button"
                    class="secondary small"
                    onClick={() => setConfirming(false)}
                  >
                    Keep
                  </button>
                </span>
              )
              : (
                <button type="button" class="secondary small" onClick={() => setConfirming(true)}>
                  Delete
                </button>
              )}
          </td>
        )
        : null}
    </tr>
  );
}

/** Seconds left as m:ss (or h:mm:ss). */
export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${rest}` : `${m}:${rest}`;
}

function AddProxy(
  { base, connectors, onAdded }: {
    base: string;
    connectors: ConnectorSummary[];
    onAdded: () => void;
  },
) {
  const [connectorId, setConnectorId] = useState(connectors[0]?.id ?? "");
  const [url, setUrl] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await api("POST", base, { body: { connector_id: connectorId, url: url.trim() } });
      setUrl("");
      onAdded();
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" aria-label="Add a proxy" onSubmit={submit}>
      <h3>Add a proxy</h3>
      <FormError error={error} />
      <Field label="Connector" field="connector_id" error={error}>
        <Select
          name="connector_id"
          value={connectorId}
          onChange={setConnectorId}
          options={connectors.map((c) => [c.id, c.name] as const)}
        />
      </Field>
      <Field
        label="Proxy URL"
        field="url"
        error={error}
        hint="scheme://user:pass@host:port (http, https, socks4 or socks5)"
      >
        <TextInput
          name="url"
          value={url}
          onInput={setUrl}
          placeholder="http://user:pass@203.0.113.7:3128"
        />
      </Field>
      <button type="submit" disabled={busy || url.trim() === ""}>Add proxy</button>
    </form>
  );
}

function UploadProxies(
  { base, connectors, onDone }: {
    base: string;
    connectors: ConnectorSummary[];
    onDone: () => void;
  },
) {
  const [connectorId, setConnectorId] = useState(connectors[0]?.id ?? "");
  const [file, setFile] = useState<File | null>(null);
  const [progress, setProgress] = useState<{ sent: number; total: number } | null>(null);
  const [report, setReport] = useState<UploadReport | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const submit = async (event: Event) => {
    event.preventDefault();
    if (!file) return;
    setError(undefined);
    setReport(undefined);
    setProgress({ sent: 0, total: file.size });
    try {
      const answer = await upload<UploadReport>(`${base}/upload`, {
        query: { connector_id: connectorId },
        body: file,
        contentType: "text/plain",
        onProgress: (sent, total) => setProgress({ sent, total }),
      });
      setReport(answer);
      onDone();
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setProgress(null);
    }
  };
  return (
    <form class="card" aria-label="Upload proxies" onSubmit={submit}>
      <h3>Upload a list</h3>
      <p class="muted">
        A text file, one <code>scheme://user:pass@host:port</code>{" "}
        a line, optionally followed by a country code; blank lines and lines starting with # are
        skipped.
      </p>
      <ErrorNote error={error} />
      <Field label="Connector" field="upload_connector_id">
        <Select
          name="upload_connector_id"
          value={connectorId}
          onChange={setConnectorId}
          options={connectors.map((c) => [c.id, c.name] as const)}
        />
      </Field>
      <Field label="File" field="file">
        <input
          type="file"
          name="file"
          accept=".txt,.csv,.list,text/plain"
          onChange={(event) =>
            setFile((event.currentTarget as HTMLInputElement).files?.[0] ?? null)}
        />
      </Field>
      <button type="submit" disabled={!file || progress !== null}>Upload</button>
      {progress
        ? (
          <div class="upload-progress">
            <progress
              aria-label="Upload progress"
              max={progress.total || 1}
              value={progress.sent}
            />
            <span class="muted">
              {progress.sent >= progress.total && progress.total > 0
                ? "Sent; the API is adding the proxies…"
                : `${Math.round((progress.sent / (progress.total || 1)) * 100)} % sent`}
            </span>
          </div>
        )
        : null}
      {report ? <UploadResult report={report} /> : null}
    </form>
  );
}

function UploadResult({ report }: { report: UploadReport }) {
  return (
    <div class="upload-result" aria-label="Upload result">
      <p>
        <strong data-count="added">{formatCount(report.added)}</strong> added,{" "}
        <strong data-count="duplicates">{formatCount(report.duplicates)}</strong> duplicates,{" "}
        <strong data-count="refused">{formatCount(report.refused)}</strong> refused, of{" "}
        {formatCount(report.total_lines)} lines.
      </p>
      {report.errors.length > 0
        ? (
          <table class="data" aria-label="Refused lines">
            <thead>
              <tr>
                <th>Line</th>
                <th>Reason</th>
              </tr>
            </thead>
            <tbody>
              {report.errors.map((error) => (
                <tr key={error.line}>
                  <td>{error.line}</td>
                  <td>{error.reason}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )
        : null}
    </div>
  );
}
