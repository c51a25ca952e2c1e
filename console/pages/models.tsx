// The host's model cache (`GET /v1/models`, docs/models.md): the hub it fetches from, its size against its limit,
// and each model in it or on its way: a fetch's progress as a bar, a failed one's error and what to do (the advice
// `svc doctor` gives). Refreshed every 2 s while a model is fetched, else every 10 s.

import { useState } from "preact/hooks";
import { ApiProblem } from "../api.js";
import { loadModels, modelRows, pollMs, usedText, type ModelCache, type ModelRow } from "../models-data.js";
import { ProblemMessage, TableWrap, usePolling } from "../ui.js";

function State({ row }: { row: ModelRow }) {
  if (row.state === "ready") return <span class="badge status-completed">ready</span>;
  if (row.state === "failed")
    return (
      <span>
        <span class="badge status-failed">failed</span> <code>{row.error?.code}</code>
      </span>
    );
  return (
    <div class="model-progress">
      <progress max={row.progress!.max} value={row.progress!.value} aria-label={`${row.model} fetched`} />
      <span data-field="progress">{row.stateText}</span>
    </div>
  );
}

function ModelTable({ rows }: { rows: ModelRow[] }) {
  return (
    <TableWrap label="Models">
      <table class="list" aria-label="Models">
        <thead>
          <tr>
            {["Model", "State", "Commit", "Size", "Last used", "Workers using it"].map((c) => (
              <th key={c} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.model} data-model={r.model} data-state={r.state}>
              <th scope="row" class="mono">
                {r.model}
              </th>
              <td data-field="state">
                <State row={r} />
              </td>
              <td class={r.fullCommit ? "mono" : undefined} data-field="commit" title={r.fullCommit}>
                {r.commit}
              </td>
              <td class="nowrap" data-field="size">
                {r.size}
              </td>
              <td class="nowrap" data-field="last-used">
                {r.lastUsed}
              </td>
              <td data-field="workers">{r.workers}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** Each model that cannot be fetched: its error as the service gives it, and what to do. */
function Failures({ rows }: { rows: ModelRow[] }) {
  const failed = rows.filter((r) => r.error);
  if (failed.length === 0) return null;
  return (
    <section aria-labelledby="model-failures-title">
      <h2 id="model-failures-title">Cannot be fetched</h2>
      {failed.map((r) => (
        <div class="problem" key={r.model} data-failed={r.model}>
          <p>
            <strong class="mono">{r.model}</strong> (<code>{r.error!.code}</code>): <span data-field="message">{r.error!.message}</span>
          </p>
          <p data-field="advice">{r.error!.advice}</p>
        </div>
      ))}
      <p class="muted">
        The service tries each of them again by itself (after 10 s, waiting twice as long each time, up to five minutes) while jobs of an endpoint that names it
        wait; those jobs stay in the queue.
      </p>
    </section>
  );
}

export function ModelsPage() {
  const [cache, setCache] = useState<ModelCache | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const load = async () => {
    try {
      setCache(await loadModels());
      setProblem(null);
    } catch (err) {
      setProblem(err);
    }
  };
  const interval = pollMs(cache);
  usePolling(load, interval, [interval]);

  const forbidden = problem instanceof ApiProblem && problem.status === 403;
  const rows = cache ? modelRows(cache.models, Date.now()) : [];
  return (
    <section aria-labelledby="models-title">
      <div class="page-head">
        <h1 id="models-title" tabIndex={-1}>
          Models
        </h1>
      </div>
      {forbidden ? <p class="notice">This key may not read the host's model cache (it needs management:read).</p> : <ProblemMessage error={problem} />}
      {cache &&
        (cache.hub === null ? (
          <p data-empty="models">The service starts no workers on this host: it keeps no model cache.</p>
        ) : (
          <>
            <p class="muted" data-summary="models">
              The Hugging Face models endpoints name, fetched once onto the host the service's workers run on, before the workers that need them start.
            </p>
            <dl class="facts">
              <dt>Hub</dt>
              <dd class="mono" data-field="hub">
                {cache.hub}
              </dd>
              <dt>Cache size</dt>
              <dd data-field="used">{usedText(cache.usedBytes, cache.limitBytes)}</dd>
              {cache.root && (
                <>
                  <dt>Folder</dt>
                  <dd class="mono" data-field="root">
                    {cache.root}
                  </dd>
                </>
              )}
            </dl>
            {rows.length === 0 ? (
              <p data-empty="models">
                No models in the cache. An endpoint names the models its workers load with <code>models: [...]</code> (<code>org/name@revision</code>, in its
                SDK options or its REST record); this host fetches each once, before the first worker that needs it starts.
              </p>
            ) : (
              <ModelTable rows={rows} />
            )}
            <Failures rows={rows} />
          </>
        ))}
      {!cache && !problem && <p>Loading…</p>}
    </section>
  );
}
