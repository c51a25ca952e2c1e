// All the user's endpoints with live status from /health (every 3 s), the create form, and the charts of all of
// them added up.

import { useState } from "preact/hooks";
import { loadEndpoints, loadHealth, type EndpointSummary, type Health } from "../endpoints-data.js";
import { formatMs, Notice, ProblemMessage, TableWrap, usePolling } from "../ui.js";
import { EndpointForm } from "./endpoint-form.js";
import { MetricsCharts } from "../charts.js";

interface EndpointGroup {
  key: string;
  title: string;
  endpoints: EndpointSummary[];
}

/** Endpoints by app and environment (sorted), then those created in the console / REST API. Pure. */
export function groupEndpoints(endpoints: readonly EndpointSummary[]): EndpointGroup[] {
  const groups = new Map<string, EndpointGroup>();
  for (const e of endpoints) {
    const key = e.source === "app" ? `${e.app}/${e.env}` : "";
    const title = e.source === "app" ? `App ${e.app} · environment ${e.env}` : "Created in the console / REST API";
    if (!groups.has(key)) groups.set(key, { key, title, endpoints: [] });
    groups.get(key)!.endpoints.push(e);
  }
  // The console / REST group ("" key) last.
  return [...groups.values()].sort((a, b) => (a.key === "" ? 1 : b.key === "" ? -1 : a.key.localeCompare(b.key)));
}

const requestCount = (n: number) => `${n} request${n === 1 ? "" : "s"}`;

/**
 * An endpoint's status cells: its workers, what waits and what runs, its cold starts. A queue endpoint's are its
 * queued jobs and jobs in progress; a load-balanced endpoint's (`lb`) its requests waiting for a worker and in flight.
 */
export function HealthCells({ health, lb = false }: { health: Health | null | undefined; lb?: boolean }) {
  if (health === undefined) return <td colSpan={4}>…</td>;
  if (health === null) return <td colSpan={4}>no status</td>;
  const w = health.workers;
  return (
    <>
      <td>
        {w.running} running, {w.idle} idle, {w.initializing ?? 0} initializing
      </td>
      {lb ? (
        <>
          <td data-field="waiting">{requestCount(health.requests?.waiting ?? 0)}</td>
          <td data-field="in-flight">{requestCount(health.requests?.inFlight ?? 0)}</td>
        </>
      ) : (
        <>
          <td>{health.jobs.inQueue}</td>
          <td>{health.jobs.inProgress}</td>
        </>
      )}
      <td>
        {health.coldStarts.count}
        {health.coldStarts.lastMs !== null && ` (last ${formatMs(health.coldStarts.lastMs)})`}
      </td>
    </>
  );
}

export function EndpointsPage() {
  const [endpoints, setEndpoints] = useState<EndpointSummary[] | null>(null);
  const [notes, setNotes] = useState<string[]>([]);
  const [health, setHealth] = useState<Record<string, Health | null>>({});
  const [error, setError] = useState<unknown>(null);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<string | null>(null);

  const refresh = usePolling(
    async () => {
      try {
        const loaded = await loadEndpoints();
        setEndpoints(loaded.endpoints);
        setNotes(loaded.notes);
        setError(null);
        const entries = await Promise.all(loaded.endpoints.map(async (e) => [e.id, await loadHealth(e.id)] as const));
        setHealth(Object.fromEntries(entries));
      } catch (err) {
        setError(err);
      }
    },
    3000,
    [],
  );

  return (
    <section aria-labelledby="endpoints-title">
      <div class="page-head">
        <h1 id="endpoints-title" tabIndex={-1}>
          Endpoints
        </h1>
        {!creating && (
          <button
            onClick={() => {
              setCreating(true);
              setCreated(null);
            }}
          >
            New endpoint
          </button>
        )}
      </div>
      <Notice text={created && `Created endpoint ${created}.`} />
      {creating && (
        <EndpointForm
          onSaved={(e) => {
            setCreating(false);
            setCreated(e.name);
            refresh();
          }}
          onCancel={() => setCreating(false)}
        />
      )}
      <ProblemMessage error={error} />
      {notes.map((n) => (
        <p class="notice" key={n}>
          {n}
        </p>
      ))}
      {endpoints === null ? (
        <p>Loading…</p>
      ) : endpoints.length === 0 ? (
        <p>No endpoints yet. Deploy an app with `svc deploy`, or create one here from a template.</p>
      ) : (
        <TableWrap label="Endpoints">
          <table class="list" aria-label="Endpoints">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Workers (min–max)</th>
                <th scope="col">Workers now</th>
                <th scope="col">Queued</th>
                <th scope="col">In progress</th>
                <th scope="col">Cold starts</th>
              </tr>
            </thead>
            {groupEndpoints(endpoints).map((group) => (
              <tbody key={group.key} data-group={group.key || "rest"}>
                <tr class="group">
                  <th scope="rowgroup" colSpan={6}>
                    {group.title}
                  </th>
                </tr>
                {group.endpoints.map((e) => (
                  <tr key={e.id} data-endpoint={e.id}>
                    <th scope="row">
                      <a href={`#/endpoints/${encodeURIComponent(e.id)}`}>{e.name}</a>
                      {e.type === "lb" && <span class="muted"> (load-balanced)</span>}
                      <div class="muted mono">{e.id}</div>
                      {e.status === "WAITING" && <div class="badge warn">WAITING: {e.statusReason}</div>}
                    </th>
                    <td>
                      {e.workersMin}–{e.workersMax}
                    </td>
                    <HealthCells health={health[e.id]} lb={e.type === "lb"} />
                  </tr>
                ))}
              </tbody>
            ))}
          </table>
        </TableWrap>
      )}
      {endpoints !== null && endpoints.length > 0 && <MetricsCharts path="/v1/metrics" title="All endpoints" />}
    </section>
  );
}
