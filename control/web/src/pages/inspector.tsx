/**
 * The Inspector: each exchange inside a tunnel the gateway intercepted for this project, newest
 * first, as the gateways captured it (GET …/mitm/requests). The list follows new captures every
 * 2 s while "Live" is ticked: each read takes the newest pages until it meets a capture already
 * shown, so a burst between two reads is not skipped; "Load older" goes back by the API's cursor.
 * Filters (text, status class, method) narrow what is loaded, in the browser. A row opens its
 * details beneath it: the headers as the client sent them, as the target got them (what the gateway took
 * out or added marked), the answer's headers, the client's TLS fingerprints and the timings.
 * Editors and admins may clear the list, after a second click.
 */
import { Fragment } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { MitmCaptureItem, MitmCapturesPage } from "../../../api/answers/mitm-captures.ts";
import type { Project } from "../../../api/answers/projects.ts";
import { isNewerStreamId } from "../../../model/mitm-captures.ts";
import { api, type ApiError } from "../api/client.ts";
import { useSession } from "../session.tsx";
import { formatBytes, formatMs } from "../ui/format.ts";
import { Checkbox, Select, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";

/** How often the list looks for new captures while live. */
export const FOLLOW_MS = 2_000;
/** Captures a read asks for. */
const PAGE = 100;
/** The most a browser keeps: the stream's own cap (STREAM_CAPS.mitmRequests). */
const KEPT = 1_000;

const STATUS_FILTERS = [
  ["", "Any status"],
  ["2", "2xx"],
  ["3", "3xx"],
  ["4", "4xx"],
  ["5", "5xx"],
  ["gateway", "The gateway's own answer"],
  ["none", "No answer"],
] as const;

function matchesStatus(item: MitmCaptureItem, filter: string): boolean {
  if (filter === "") return true;
  if (filter === "gateway") return item.proxy_status !== "";
  if (filter === "none") return item.status === 0;
  return String(item.status).startsWith(filter) && String(item.status).length === 3;
}

function matchesText(item: MitmCaptureItem, text: string): boolean {
  if (text === "") return true;
  const wanted = text.toLowerCase();
  return [
    item.method,
    item.host,
    item.path,
    String(item.status),
    item.proxy_status,
    item.connector_name ?? "",
    item.proxy_address ?? "",
    item.sni,
    item.ja3,
    item.ja4,
  ].some((field) => field.toLowerCase().includes(wanted));
}

export function exitOf(item: MitmCaptureItem): string {
  const connector = item.connector_name ?? item.connector_id;
  const proxy = item.proxy_address ?? item.proxy_id;
  if (connector === null && proxy === null) return "–";
  return [connector, proxy].filter((part) => part !== null).join(" · ");
}

export function Inspector({ project }: { project: Project }) {
  const session = useSession();
  const path = `/projects/${project.id}/mitm/requests`;
  const [items, setItems] = useState<MitmCaptureItem[]>([]);
  const [older, setOlder] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | undefined>();
  const [loaded, setLoaded] = useState(false);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [live, setLive] = useState(true);
  const [text, setText] = useState("");
  const [status, setStatus] = useState("");
  const [method, setMethod] = useState("");
  const [selectedId, setSelectedId] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [round, setRound] = useState(0);
  // The list as the last read left it, for the next read to merge into.
  const current = useRef<MitmCaptureItem[]>([]);
  const busy = useRef(false);

  const show = (next: MitmCaptureItem[]) => {
    current.current = next;
    setItems(next);
  };

  /** The captures newer than those shown, reading pages back until one already shown. */
  const follow = async (signal: AbortSignal) => {
    if (busy.current) return;
    busy.current = true;
    try {
      const shown = current.current;
      const newest = shown[0]?.id;
      const fresh: MitmCaptureItem[] = [];
      let cursor: string | null = null;
      let met = false;
      let last: MitmCapturesPage | undefined;
      do {
        last = await api<MitmCapturesPage>("GET", path, {
          query: { count: PAGE, cursor: cursor ?? undefined },
          signal,
        });
        for (const item of last.items) {
          if (newest !== undefined && !isNewerStreamId(item.id, newest)) {
            met = true;
            break;
          }
          fresh.push(item);
        }
        cursor = last.next_cursor;
      } while (!met && cursor !== null && newest !== undefined && fresh.length < KEPT);
      if (newest === undefined) {
        // The first read: its older pages come by "Load older".
        show(fresh);
        setOlder(last.next_cursor);
      } else if (fresh.length > 0) {
        show([...fresh, ...shown].slice(0, KEPT));
      }
      setError(undefined);
      setLoaded(true);
    } catch (failure) {
      if ((failure as Error).name !== "AbortError") setError(failure as ApiError);
    } finally {
      busy.current = false;
    }
  };

  useEffect(() => {
    const abort = new AbortController();
    // Paused, the list stays as it is; only an empty one (the first read, a clear) is read.
    if (live || current.current.length === 0) follow(abort.signal);
    if (!live) return () => abort.abort();
    const timer = setInterval(() => follow(abort.signal), FOLLOW_MS);
    return () => {
      clearInterval(timer);
      abort.abort();
      busy.current = false;
    };
  }, [path, live, round]);

  const loadOlder = async () => {
    if (older === null) return;
    setLoadingOlder(true);
    try {
      const page = await api<MitmCapturesPage>("GET", path, {
        query: { count: PAGE, cursor: older },
      });
      show([...current.current, ...page.items]);
      setOlder(page.next_cursor);
      setError(undefined);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setLoadingOlder(false);
    }
  };

  const clear = async () => {
    try {
      await api("DELETE", path);
      setConfirming(false);
      setSelectedId(null);
      show([]);
      setOlder(null);
      setError(undefined);
      setRound((n) => n + 1);
    } catch (failure) {
      setError(failure as ApiError);
    }
  };

  const methods = useMemo(
    () => [...new Set(items.map((item) => item.method))].sort(),
    [items],
  );
  const shown = items.filter((item) =>
    (method === "" || item.method === method) && matchesStatus(item, status) &&
    matchesText(item, text.trim())
  );

  return (
    <section class="inspector">
      <header class="toolbar">
        <h2>Inspector</h2>
        <div class="toolbar-filters">
          <label>
            Search{" "}
            <TextInput
              name="search"
              type="search"
              value={text}
              onInput={setText}
              placeholder="host, path, exit, JA4…"
            />
          </label>
          <label>
            Status{" "}
            <Select name="status" value={status} onChange={setStatus} options={STATUS_FILTERS} />
          </label>
          <label>
            Method{" "}
            <Select
              name="method"
              value={method}
              onChange={setMethod}
              options={[["", "Any method"], ...methods.map((m) => [m, m] as const)]}
            />
          </label>
          <Checkbox name="live" checked={live} onChange={setLive} label="Live" />
          {session.canEdit
            ? (confirming
              ? (
                <>
                  <button type="button" class="danger" onClick={clear}>Clear them now</button>
                  <button type="button" class="secondary" onClick={() => setConfirming(false)}>
                    Keep
                  </button>
                </>
              )
              : (
                <button type="button" class="secondary" onClick={() => setConfirming(true)}>
                  Clear
                </button>
              ))
            : null}
        </div>
      </header>
      {project.tls_mitm_mode === "off"
        ? (
          <p class="note" role="note">
            TLS interception is off for this project, so its tunnels are relayed unopened and
            nothing new is captured. Turn it on in its settings.
          </p>
        )
        : null}
      <p class="muted">
        Each request inside an intercepted tunnel, newest first: the project's last thousand or so,
        with URL queries, credentials and cookies taken out. A sample, not a record: captures are
        dropped while Redis is away.{live ? " New ones show within 2 s." : ""}
      </p>
      <ErrorNote error={error} />
      <table class="data inspector-list" aria-label="Intercepted requests">
        <thead>
          <tr>
            <th>When</th>
            <th>Method</th>
            <th>Host</th>
            <th>Path</th>
            <th>Status</th>
            <th>Time</th>
            <th>Exit</th>
            <th>Bytes ↑/↓</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((item) => (
            <Fragment key={item.id}>
              <tr
                data-capture={item.id}
                class={item.id === selectedId ? "selected clickable" : "clickable"}
                onClick={() => setSelectedId(item.id === selectedId ? null : item.id)}
              >
                <td>
                  <Time value={item.at} />
                </td>
                <td>{item.method}</td>
                <td>
                  <code>{item.host}</code>
                </td>
                <td class="message">
                  <button
                    type="button"
                    class="link"
                    aria-expanded={item.id === selectedId}
                    title="Show its headers, fingerprints and timings"
                  >
                    {item.path}
                  </button>
                </td>
                <td>
                  {item.status === 0 ? "–" : item.status}
                  {item.proxy_status
                    ? <span class="badge muted">{item.proxy_status.replaceAll("_", " ")}</span>
                    : null}
                </td>
                <td>{formatMs(item.total_ms)}</td>
                <td>{exitOf(item)}</td>
                <td class="nowrap">
                  {formatBytes(item.bytes_up)} / {formatBytes(item.bytes_down)}
                </td>
              </tr>
              {item.id === selectedId
                ? (
                  <tr class="capture-details">
                    <td colSpan={8}>
                      <Details item={item} onClose={() => setSelectedId(null)} />
                    </td>
                  </tr>
                )
                : null}
            </Fragment>
          ))}
        </tbody>
      </table>
      {loaded && items.length === 0 && !error ? <p class="muted">Nothing captured yet.</p> : null}
      {items.length > 0 && shown.length === 0
        ? <p class="muted">No capture loaded matches the filters.</p>
        : null}
      <div class="actions">
        {older !== null
          ? (
            <button type="button" class="secondary" disabled={loadingOlder} onClick={loadOlder}>
              {loadingOlder ? "Loading…" : "Load older"}
            </button>
          )
          : null}
        <span class="muted" data-loaded>
          {items.length} loaded{shown.length !== items.length ? `, ${shown.length} shown` : ""}
        </span>
      </div>
    </section>
  );
}

type Header = [string, string];

/** What the gateway did to the client's headers: those it took out, added or changed. */
export function headerChanges(
  before: readonly Header[],
  after: readonly Header[],
): { removed: Set<number>; added: Set<number>; changed: Set<number> } {
  const key = (name: string) => name.toLowerCase();
  const beforeValues = new Map<string, string[]>();
  for (const [name, value] of before) {
    beforeValues.set(key(name), [...(beforeValues.get(key(name)) ?? []), value]);
  }
  const afterNames = new Set(after.map(([name]) => key(name)));
  const removed = new Set<number>();
  before.forEach(([name], index) => {
    if (!afterNames.has(key(name))) removed.add(index);
  });
  const added = new Set<number>();
  const changed = new Set<number>();
  after.forEach(([name, value], index) => {
    const values = beforeValues.get(key(name));
    if (values === undefined) added.add(index);
    else if (!values.includes(value)) changed.add(index);
  });
  return { removed, added, changed };
}

function Headers(
  { label, headers, marks }: {
    label: string;
    headers: readonly Header[];
    marks?: (index: number) => string | undefined;
  },
) {
  return (
    <section>
      <h4>{label}</h4>
      {headers.length === 0
        ? <p class="muted">None.</p>
        : (
          <table class="data headers" aria-label={label}>
            <tbody>
              {headers.map(([name, value], index) => {
                const mark = marks?.(index);
                return (
                  <tr key={`${index}:${name}`} data-mark={mark}>
                    <th scope="row">{name}</th>
                    <td class="message">
                      {value}
                      {mark ? <span class="badge muted">{mark}</span> : null}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
    </section>
  );
}

function Details({ item, onClose }: { item: MitmCaptureItem; onClose: () => void }) {
  const changes = headerChanges(item.request_headers, item.sent_headers);
  const fields: [string, string][] = [
    ["Status", item.status === 0 ? "no answer" : String(item.status)],
    ["The gateway's answer", item.proxy_status.replaceAll("_", " ") || "–"],
    ["First byte", formatMs(item.first_byte_ms)],
    ["Total", formatMs(item.total_ms)],
    ["Exit", exitOf(item)],
    ["Sent", formatBytes(item.bytes_up)],
    ["Received", formatBytes(item.bytes_down)],
    ["Interception", item.mode],
    ["SNI", item.sni || "– (none sent)"],
    ["JA3", item.ja3 || "–"],
    ["JA4", item.ja4 || "–"],
    ["HTTP/2 fingerprint", item.http2 || "– (none: HTTP/1.1 towards the target)"],
  ];
  return (
    <section class="inspector-details" aria-label="Request details">
      <header class="toolbar">
        <h3>
          {item.method} <code>{item.host}{item.path}</code>
        </h3>
        <button type="button" class="secondary small" onClick={onClose}>Close</button>
      </header>
      <p class="muted">
        <Time value={item.at} />
      </p>
      <dl class="facts">
        {fields.map(([label, value]) => (
          <div key={label} data-fact={label}>
            <dt>{label}</dt>
            <dd>
              <code>{value}</code>
            </dd>
          </div>
        ))}
      </dl>
      <div class="header-lists">
        <Headers
          label="Headers from the client"
          headers={item.request_headers}
          marks={(index) => (changes.removed.has(index) ? "taken out" : undefined)}
        />
        <Headers
          label="Headers sent to the target"
          headers={item.sent_headers}
          marks={(index) =>
            changes.added.has(index) ? "added" : changes.changed.has(index) ? "changed" : undefined}
        />
        <Headers label="Response headers" headers={item.response_headers} />
      </div>
    </section>
  );
}
