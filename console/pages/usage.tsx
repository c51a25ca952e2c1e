// What the signed-in user's endpoints used (`GET /v1/usage`): worker-seconds, GPU-seconds by GPU type and jobs,
// added up per endpoint over the last 24 hours or the last 7 days, and the hourly rows behind them. The operator's
// key reads every user's. Each number is also in a <data> element's value, exactly as the route gave it.

import { useState } from "preact/hooks";
import { ApiProblem } from "../api.js";
import { loadEndpoints } from "../endpoints-data.js";
import { formatByType, formatSeconds, hoursNewestFirst, loadUsage, totalsByEndpoint, USAGE_WINDOWS, type Usage, type UsageWindow } from "../usage-data.js";
import { ListTable, ProblemMessage, usePolling } from "../ui.js";

/** Usage moves by the minute at most (running workers' time is written every minute). */
const USAGE_POLL_MS = 30_000;

function Seconds({ value, field }: { value: number; field: string }) {
  return (
    <data value={String(value)} data-field={field} title={`${value.toFixed(1)} s`}>
      {formatSeconds(value)}
    </data>
  );
}

function EndpointName({ id, names }: { id: string; names: Record<string, string> }) {
  const name = names[id];
  return name ? <a href={`#/endpoints/${encodeURIComponent(id)}`}>{name}</a> : <span class="mono">{id}</span>;
}

export function UsagePage() {
  const [window, setWindow] = useState<UsageWindow>("24h");
  const [usage, setUsage] = useState<{ window: UsageWindow; body: Usage } | null>(null);
  const [names, setNames] = useState<Record<string, string>>({});
  const [problem, setProblem] = useState<unknown>(null);

  usePolling(
    async () => {
      try {
        const body = await loadUsage(window);
        setUsage({ window, body });
        setProblem(null);
        if (body.hours.some((h) => !(h.endpointId in names))) {
          // Names are a nicety: ids stand in when the endpoints cannot be read (or are gone).
          const { endpoints } = await loadEndpoints().catch(() => ({ endpoints: [] }));
          setNames(Object.fromEntries(endpoints.map((e) => [e.id, e.name])));
        }
      } catch (err) {
        setProblem(err);
      }
    },
    USAGE_POLL_MS,
    [window],
  );

  const forbidden = problem instanceof ApiProblem && problem.status === 403;
  const shown = usage?.body;
  const perEndpoint = shown ? totalsByEndpoint(shown.hours) : [];
  const users = new Set(shown?.hours.map((h) => h.userId));
  const manyUsers = users.size > 1;
  // Requests only where a load-balanced endpoint had any: a queue endpoint's work is its jobs.
  const lbRequests = (shown?.totals.requests ?? 0) > 0;
  const label = USAGE_WINDOWS.find((w) => w.key === window)!.label.toLowerCase();
  return (
    <section aria-labelledby="usage-title">
      <div class="page-head">
        <h1 id="usage-title" tabIndex={-1}>
          Usage
        </h1>
        <div class="toggle" role="group" aria-label="Time window">
          {USAGE_WINDOWS.map((w) => (
            <button key={w.key} type="button" class="secondary" aria-pressed={w.key === window} onClick={() => setWindow(w.key)}>
              {w.label}
            </button>
          ))}
        </div>
      </div>
      <p class="muted">
        Worker time (a worker's life from start to end, whatever it did), GPU time by GPU type (worker time times the GPUs it held), jobs that ended and
        load-balanced requests answered, per endpoint and hour: what an operator bills or budgets on. Whole hours: the first hour may start before the window.
      </p>
      {forbidden ? (
        <p class="notice">This key may not read usage (it needs admin, deploy, metrics, management:read, management:write or jobs:*).</p>
      ) : (
        <ProblemMessage error={problem} />
      )}
      {shown && usage && (
        <div data-loaded={usage.window}>
          <p data-summary="usage">
            In the {label}: <Seconds value={shown.totals.workerSeconds} field="workerSeconds" /> of worker time,{" "}
            <Seconds value={shown.totals.gpuSeconds} field="gpuSeconds" /> of GPU time
            {Object.keys(shown.totals.gpuSecondsByType).length > 0 && <> ({formatByType(shown.totals.gpuSecondsByType)})</>},{" "}
            <data value={String(shown.totals.jobs)} data-field="jobs">
              {shown.totals.jobs} job{shown.totals.jobs === 1 ? "" : "s"}
            </data>
            {lbRequests && (
              <>
                ,{" "}
                <data value={String(shown.totals.requests)} data-field="requests">
                  {shown.totals.requests} load-balanced request{shown.totals.requests === 1 ? "" : "s"}
                </data>
              </>
            )}
            .
          </p>
          <h2>By endpoint</h2>
          {perEndpoint.length === 0 ? (
            <p data-empty="usage">No usage in the {label}.</p>
          ) : (
            <ListTable
              label="Usage by endpoint"
              columns={["Endpoint", ...(manyUsers ? ["User"] : []), "Worker time", "GPU time", "GPU time by type", "Jobs", ...(lbRequests ? ["Requests"] : [])]}
            >
              {perEndpoint.map((e) => (
                <tr key={`${e.userId}/${e.endpointId}`} data-endpoint={e.endpointId}>
                  <td>
                    <EndpointName id={e.endpointId} names={names} />
                  </td>
                  {manyUsers && <td>{e.userId}</td>}
                  <td>
                    <Seconds value={e.workerSeconds} field="workerSeconds" />
                  </td>
                  <td>
                    <Seconds value={e.gpuSeconds} field="gpuSeconds" />
                  </td>
                  <td data-field="gpuSecondsByType">{formatByType(e.gpuSecondsByType)}</td>
                  <td>
                    <data value={String(e.jobs)} data-field="jobs">
                      {e.jobs}
                    </data>
                  </td>
                  {lbRequests && (
                    <td>
                      <data value={String(e.requests)} data-field="requests">
                        {e.requests}
                      </data>
                    </td>
                  )}
                </tr>
              ))}
            </ListTable>
          )}
          {shown.hours.length > 0 && (
            <>
              <h2>By hour</h2>
              <ListTable
                label="Usage by hour"
                columns={[
                  "Hour",
                  "Endpoint",
                  ...(manyUsers ? ["User"] : []),
                  "GPU type",
                  "Worker time",
                  "GPU time",
                  "Jobs",
                  ...(lbRequests ? ["Requests"] : []),
                ]}
              >
                {hoursNewestFirst(shown.hours).map((h) => (
                  <tr key={`${h.hour}/${h.userId}/${h.endpointId}/${h.gpuType ?? ""}`} data-hour={h.hour} data-endpoint={h.endpointId}>
                    <td>
                      <time dateTime={h.hour}>{new Date(h.hour).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" })}</time>
                    </td>
                    <td>
                      <EndpointName id={h.endpointId} names={names} />
                    </td>
                    {manyUsers && <td>{h.userId}</td>}
                    <td>{h.gpuType ?? "—"}</td>
                    <td>
                      <Seconds value={h.workerSeconds} field="workerSeconds" />
                    </td>
                    <td>
                      <Seconds value={h.gpuSeconds} field="gpuSeconds" />
                    </td>
                    <td>
                      <data value={String(h.jobs)} data-field="jobs">
                        {h.jobs}
                      </data>
                    </td>
                    {lbRequests && (
                      <td>
                        <data value={String(h.requests)} data-field="requests">
                          {h.requests}
                        </data>
                      </td>
                    )}
                  </tr>
                ))}
              </ListTable>
            </>
          )}
        </div>
      )}
      {!usage && !problem && <p>Loading…</p>}
    </section>
  );
}
