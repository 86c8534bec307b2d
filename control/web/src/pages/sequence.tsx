/**
 * A project's connector sequence: its connectors served one at a time, in order, each until it
 * runs dry. The page shows the sequence as stored (the current connector marked, when each ran
 * dry, what happens at the end, whether it is exhausted); editors choose and order the
 * connectors and `on_end`, and clear it. The API's message for a field shows beside it.
 */
import { useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import type { Connector } from "../../../api/answers/connectors.ts";
import type { Sequence as SequenceData } from "../../../api/answers/sequences.ts";
import { useSession } from "../session.tsx";
import { Field, FormError, Select } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { useForm } from "../ui/use-form.ts";

/** How often the sequence is read again: a connector running dry moves it on. */
const REFRESH_MS = 15_000;

const ON_END = [
  ["stop", "stop: past the last connector, serve nothing (exhausted)"],
  ["loop", "loop: go back to the first"],
  ["stay_last", "stay_last: keep the last one"],
] as const;

export function Sequence({ projectId }: { projectId: string }) {
  const session = useSession();
  const path = `/projects/${projectId}/sequence`;
  const loaded = useApi<SequenceData>(path, undefined, REFRESH_MS);
  const connectors = useApi<Connector[]>(`/projects/${projectId}/connectors`);
  const [cleared, setCleared] = useState(false);
  // A 404 is the project without a sequence, not a failure.
  const none = loaded.error?.status === 404 || cleared;
  const sequence = none ? undefined : loaded.data;

  return (
    <section class="sequence">
      <header class="toolbar">
        <h2>Sequence</h2>
      </header>
      <p class="muted">
        With a sequence, gateways route the project through its current connector alone. When it
        runs dry (a provider_api pool's run of empty fetches), the sequence moves to the next one;
        past the last, <code>on_end</code>{" "}
        decides. When the current connector cannot serve, clients get 503 with the reason. Without a
        sequence, the connectors share requests by weight.
      </p>
      {loaded.error && !none ? <ErrorNote error={loaded.error} /> : null}
      <ErrorNote error={connectors.error} />
      {sequence ? <SequenceView sequence={sequence} projectId={projectId} /> : null}
      {none ? <p class="muted" data-no-sequence>This project has no connector sequence.</p> : null}
      {session.canEdit && connectors.data && (sequence || none)
        ? (
          <SequenceForm
            key={`${sequence?.version ?? "none"}`}
            path={path}
            sequence={sequence}
            connectors={connectors.data}
            onSaved={() => {
              setCleared(false);
              loaded.reload();
            }}
            onCleared={() => {
              setCleared(true);
              loaded.reload();
            }}
          />
        )
        : null}
    </section>
  );
}

function SequenceView({ sequence, projectId }: { sequence: SequenceData; projectId: string }) {
  return (
    <div class="card" aria-label="Current sequence" role="region">
      <p>
        {sequence.exhausted
          ? (
            <span class="badge danger" data-exhausted>
              exhausted: nothing serves until the sequence is set again
            </span>
          )
          : <span class="badge ok">serving</span>} At the end:{" "}
        <code data-on-end>
          {sequence.on_end}
        </code>. When nothing can serve: <code data-on-unavailable>{sequence.on_unavailable}</code>.
        {sequence.switched_at
          ? (
            <>
              {" "}Last moved <Time value={sequence.switched_at} />.
            </>
          )
          : null}
      </p>
      <ol class="sequence-list" aria-label="Sequence connectors">
        {sequence.connectors.map((connector, index) => {
          const current = connector.id === sequence.current_connector_id;
          return (
            <li
              key={connector.id}
              data-sequence-connector={connector.name}
              data-current={current ? "true" : undefined}
            >
              <a href={`/projects/${projectId}/connectors/${connector.id}`}>{connector.name}</a>
              {current ? <span class="badge ok">current</span> : null}
              {connector.depleted_at
                ? (
                  <span class="badge warning">
                    depleted <Time value={connector.depleted_at} />
                  </span>
                )
                : null}
              {!current && index < sequence.current_index
                ? <span class="muted">passed</span>
                : null}
            </li>
          );
        })}
      </ol>
    </div>
  );
}

interface FormState {
  connector_ids: string[];
  on_end: string;
  adding: string;
}

function SequenceForm(
  { path, sequence, connectors, onSaved, onCleared }: {
    path: string;
    sequence: SequenceData | undefined;
    connectors: readonly Connector[];
    onSaved: () => void;
    onCleared: () => void;
  },
) {
  const { state, set, error, busy, saved, submit } = useForm(
    (stored: SequenceData | undefined): FormState => ({
      connector_ids: stored?.connector_ids ?? [],
      on_end: stored?.on_end ?? "stop",
      adding: "",
    }),
    sequence,
    (values: FormState) => ({ connector_ids: values.connector_ids, on_end: values.on_end }),
    async (body) => {
      const stored = await api<SequenceData>("PUT", path, { body });
      onSaved();
      return stored;
    },
  );
  const [confirming, setConfirming] = useState(false);
  const [clearError, setClearError] = useState<ApiError | undefined>();
  const nameOf = (id: string) => connectors.find((c) => c.id === id)?.name ?? id;
  const rest = connectors.filter((c) => !state.connector_ids.includes(c.id));
  const ids = state.connector_ids;
  const move = (index: number, by: number) => {
    const next = [...ids];
    [next[index], next[index + by]] = [next[index + by], next[index]];
    set("connector_ids")(next);
  };
  const clear = async () => {
    setClearError(undefined);
    try {
      await api("DELETE", path);
      setConfirming(false);
      onCleared();
    } catch (failure) {
      setClearError(failure as ApiError);
    }
  };

  return (
    <form class="card" onSubmit={submit} aria-label="Set the sequence" noValidate>
      <h3>{sequence ? "Change the sequence" : "Set a sequence"}</h3>
      <FormError error={error} />
      <Field
        label="Connectors, in order"
        field="connector_ids"
        error={error}
        required
        hint="At least two, each once; the first serves first. Saving starts the sequence over"
      >
        <ol class="sequence-edit">
          {ids.map((id, index) => (
            <li key={id} data-chosen={nameOf(id)}>
              {nameOf(id)}{" "}
              <button
                type="button"
                class="secondary small"
                disabled={index === 0}
                onClick={() => move(index, -1)}
                aria-label={`Move ${nameOf(id)} up`}
              >
                ↑
              </button>
              <button
                type="button"
                class="secondary small"
                disabled={index === ids.length - 1}
                onClick={() => move(index, 1)}
                aria-label={`Move ${nameOf(id)} down`}
              >
                ↓
              </button>
              <button
                type="button"
                class="secondary small"
                onClick={() => set("connector_ids")(ids.filter((other) => other !== id))}
                aria-label={`Remove ${nameOf(id)}`}
              >
                Remove
              </button>
            </li>
          ))}
        </ol>
      </Field>
      {rest.length > 0
        ? (
          <div class="row">
            <Select
              name="adding"
              value={state.adding}
              onChange={set("adding")}
              options={[
                ["", "Add a connector…"] as const,
                ...rest.map((c) => [c.id, `${c.name} (${c.kind})`] as const),
              ]}
            />
            <button
              type="button"
              class="secondary"
              disabled={state.adding === ""}
              onClick={() => {
                set("connector_ids")([...ids, state.adding]);
                set("adding")("");
              }}
            >
              Add
            </button>
          </div>
        )
        : null}
      <Field label="At the end" field="on_end" error={error}>
        <Select name="on_end" value={state.on_end} onChange={set("on_end")} options={ON_END} />
      </Field>
      <div class="actions">
        <button type="submit" disabled={busy}>
          {busy ? "Saving…" : sequence ? "Save the sequence" : "Set the sequence"}
        </button>
        {saved ? <span class="saved" role="status">Saved</span> : null}
        {sequence
          ? (confirming
            ? (
              <>
                <button type="button" class="danger" onClick={clear}>Clear it now</button>
                <button type="button" class="secondary" onClick={() => setConfirming(false)}>
                  Keep
                </button>
              </>
            )
            : (
              <button type="button" class="secondary" onClick={() => setConfirming(true)}>
                Clear the sequence
              </button>
            ))
          : null}
      </div>
      <ErrorNote error={clearError} />
    </form>
  );
}
