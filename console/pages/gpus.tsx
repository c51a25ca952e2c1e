// The host's GPUs (`GET /v1/gpus`): each with its type ids, utilization and memory as last sampled, and who holds
// it. Refreshed every 5 s (the service samples nvidia-smi as often); "Read again" makes it read nvidia-smi now.
// Also the pieces the endpoint page shows its workers' GPUs with.

import { useState } from "preact/hooks";
import { ApiProblem } from "../api.js";
import { loadEndpoints } from "../endpoints-data.js";
import { holdingOf, loadGpus, memoryText, type Gpu, type GpuList } from "../gpus-data.js";
import { ProblemMessage, usePolling } from "../ui.js";

const GPUS_POLL_MS = 5000;

/** GPU type ids, each kept on one line; the list wraps between them. */
export function TypeIds({ ids, label, ordered = false }: { ids: readonly string[]; label: string; ordered?: boolean }) {
  const items = ids.map((t) => (
    <li key={t}>
      <code class="chip">{t}</code>
    </li>
  ));
  return ordered ? (
    <ol class="chips ordered" aria-label={label}>
      {items}
    </ol>
  ) : (
    <ul class="chips" aria-label={label}>
      {items}
    </ul>
  );
}

/** Utilization and memory as bars with their numbers beside them ("—": not sampled). */
export function GpuUse({ gpu }: { gpu: Gpu }) {
  const name = `GPU ${gpu.index}`;
  return (
    <div class="gpu-use">
      <span class="gpu-use-label">Utilization</span>
      <meter min={0} max={100} value={gpu.utilizationPercent ?? 0} aria-label={`${name} utilization`} />
      <span data-field="utilization">{gpu.utilizationPercent === null ? "—" : `${gpu.utilizationPercent} %`}</span>
      <span class="gpu-use-label">Memory</span>
      <meter min={0} max={gpu.memoryTotalMiB || 1} value={gpu.memoryUsedMiB ?? 0} aria-label={`${name} memory used`} />
      <span data-field="memory">{memoryText(gpu.memoryUsedMiB, gpu.memoryTotalMiB)}</span>
    </div>
  );
}

function Holder({ gpu, names }: { gpu: Gpu; names: Record<string, string> }) {
  const h = holdingOf(gpu);
  if (h.kind === "free") return <span class="badge status-completed">free</span>;
  if (h.kind === "other") return <span>another user's worker</span>;
  return (
    <span>
      worker <span class="mono">{h.workerId}</span> of <a href={`#/endpoints/${encodeURIComponent(h.endpointId)}`}>{names[h.endpointId] ?? h.endpointId}</a>
      {h.typeId && <span class="muted"> (as {h.typeId})</span>}
    </span>
  );
}

function GpuCard({ gpu, names }: { gpu: Gpu; names: Record<string, string> }) {
  const titleId = `gpu-${gpu.index}-title`;
  return (
    <article class="card gpu" data-gpu={gpu.index} aria-labelledby={titleId}>
      <h2 id={titleId}>
        GPU {gpu.index} <span class="gpu-name">{gpu.name}</span>
      </h2>
      <dl class="facts">
        <dt>Held by</dt>
        <dd data-field="holder">
          <Holder gpu={gpu} names={names} />
        </dd>
        <dt>Types</dt>
        <dd>
          <TypeIds ids={gpu.typeIds} label={`Type ids of GPU ${gpu.index}`} />
        </dd>
        <dt>Use</dt>
        <dd>
          <GpuUse gpu={gpu} />
        </dd>
        {gpu.migMode === "Enabled" && (
          <>
            <dt>MIG</dt>
            <dd>enabled: not given to workers whole</dd>
          </>
        )}
        <dt>UUID</dt>
        <dd class="mono">{gpu.uuid}</dd>
      </dl>
    </article>
  );
}

export function GpusPage() {
  const [list, setList] = useState<GpuList | null>(null);
  const [names, setNames] = useState<Record<string, string>>({});
  const [problem, setProblem] = useState<unknown>(null);
  const [reading, setReading] = useState(false);

  const load = async (refresh: boolean) => {
    try {
      const loaded = await loadGpus(refresh);
      setList(loaded);
      setProblem(null);
      // Holders name endpoint ids; look their names up when one is new to this page.
      const holders = loaded.gpus.map(holdingOf).flatMap((h) => (h.kind === "worker" ? [h.endpointId] : []));
      if (holders.some((id) => !(id in names))) {
        const { endpoints } = await loadEndpoints().catch(() => ({ endpoints: [] }));
        setNames(Object.fromEntries(endpoints.map((e) => [e.id, e.name])));
      }
    } catch (err) {
      setProblem(err);
    }
  };
  usePolling(() => load(false), GPUS_POLL_MS, []);
  const readAgain = async () => {
    setReading(true);
    await load(true);
    setReading(false);
  };

  const forbidden = problem instanceof ApiProblem && problem.status === 403;
  return (
    <section aria-labelledby="gpus-title">
      <div class="page-head">
        <h1 id="gpus-title" tabIndex={-1}>
          GPUs
        </h1>
        <button class="secondary" onClick={() => void readAgain()} disabled={reading}>
          {reading ? "Reading…" : "Read again"}
        </button>
      </div>
      {forbidden ? <p class="notice">This key may not read the host's GPUs (it needs management:read).</p> : <ProblemMessage error={problem} />}
      {list && (
        <>
          <p class="muted" data-summary="gpus">
            The GPUs of the host the service's workers run on.{" "}
            {list.gpus.length > 0 && (
              <>
                {list.gpus.length} GPU{list.gpus.length === 1 ? "" : "s"}
                {list.driverVersion && `, driver ${list.driverVersion}`}
                {list.cudaVersion && `, CUDA ${list.cudaVersion}`}; use as sampled every few seconds.
              </>
            )}
          </p>
          {list.error && (
            <div class="problem" role="alert">
              <p>The last read of nvidia-smi failed (the GPUs below are those read before): {list.error}</p>
            </div>
          )}
          {list.gpus.length === 0 ? (
            <p data-empty="gpus">No GPUs found on this host: there is no nvidia-smi on the service's PATH, or it lists none.</p>
          ) : (
            !list.assigning && <p class="notice">The service does not give its workers GPUs of their own here.</p>
          )}
          <div class="gpu-grid">
            {list.gpus.map((g) => (
              <GpuCard key={g.uuid} gpu={g} names={names} />
            ))}
          </div>
        </>
      )}
      {!list && !problem && <p>Loading…</p>}
    </section>
  );
}
