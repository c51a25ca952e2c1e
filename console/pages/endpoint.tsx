// One endpoint: live status, "try it" (run / runsync), recent jobs, a job's record, stream and webhook deliveries, cancel /
// retry / purge as the job API allows them, logs following live; edit and delete for console endpoints; a GPU
// endpoint's GPU settings, the GPUs its workers hold and why workers wait.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiProblem, FINAL_STATES, readNdjson, request } from "../api.js";
import { crashLoopText, loadEndpoints, loadHealth, loadRecord, type EndpointRecord, type EndpointSummary, type Health } from "../endpoints-data.js";
import { gpusByWorker } from "../gpus-data.js";
import { exampleBody, type CallableFunction } from "../forms.js";
import { Field, formatMs, Json, ListTable, Notice, ProblemMessage, Time, useConfirm, usePolling } from "../ui.js";
import { EndpointForm } from "./endpoint-form.js";
import { EndpointAccess, EndpointCharts, EndpointSettings, EndpointWorkers } from "./endpoint-overview.js";
import { Releases } from "../releases.js";
import { HealthCells } from "./endpoints.js";
import { GpuUse, TypeIds } from "./gpus.js";
import { WebhookDeliveries } from "./webhook-deliveries.js";

interface JobRecord {
  id: string;
  status: string;
  delayTime: number;
  executionTime: number;
  output?: unknown;
  error?: string;
  errorType?: string;
  errorStack?: string;
  retries?: number;
  /** How many times a worker took the job (svc's addition to the record). */
  attempts?: number;
}

interface JobSummary {
  id: string;
  status: string;
  createdAt: number;
  startedAt?: number | null;
  completedAt?: number | null;
  workerId?: string | null;
  attempts?: number;
  delayTime: number;
  executionTime: number;
  function: string | null;
  input?: unknown;
  inputOmitted?: true;
  error?: string;
  retries?: number;
  /** Its result expired: this is its history record (GET /v2/{id}/jobs/{job}), kept until `keptUntil`. */
  resultExpired?: true;
  resultExpiredAt?: number;
  keptUntil?: number;
}

interface LogLine {
  ts: number;
  workerId: string;
  jobId: string | null;
  /** stdout, stderr, log; "dropped": the service's notice of lines over the log quotas, with their count. */
  stream: string;
  text: string;
  dropped?: number;
}

/** How often the recent jobs list reloads by itself. */
const JOBS_POLL_MS = 10_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const v2 = (endpointId: string, rest: string) => `/v2/${encodeURIComponent(endpointId)}/${rest}`;

/** A job's own address in the console: it loads directly, and the browser's back button leaves the job. */
export const jobHash = (endpointId: string, jobId: string) => `#/endpoints/${encodeURIComponent(endpointId)}/jobs/${encodeURIComponent(jobId)}`;

function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status.toLowerCase()}`}>{status}</span>;
}

function TryIt({ endpointId, functions, onJob }: { endpointId: string; functions: readonly CallableFunction[]; onJob(id: string): void }) {
  const [fn, setFn] = useState<string | undefined>(functions[0]?.name);
  // Starts from the function's example input (built from its TypeScript input type); picking another function
  // starts again from that one's.
  const [input, setInput] = useState(() => exampleBody(functions, functions[0]?.name));
  const [mode, setMode] = useState<"runsync" | "run">("runsync");
  const [result, setResult] = useState<JobRecord | null>(null);
  const [inputError, setInputError] = useState<string[] | undefined>();
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setProblem(null);
    setResult(null);
    let body: unknown;
    try {
      body = JSON.parse(input);
    } catch (err) {
      setInputError([`not valid JSON: ${err instanceof Error ? err.message : String(err)}`]);
      return;
    }
    setInputError(undefined);
    setBusy(true);
    try {
      const answer = await api<JobRecord>(v2(endpointId, mode), { body });
      if (mode === "runsync") setResult(answer);
      onJob(answer.id);
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setInputError(err.errors);
      setProblem(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form" onSubmit={submit} aria-labelledby="tryit-title">
      <h2 id="tryit-title">Try it</h2>
      {functions.length > 1 && (
        <Field label="Function" hint={functions[0]?.class ? `Methods of class ${functions[0].class}` : undefined}>
          {({ id, describedBy }) => (
            <select
              id={id}
              aria-describedby={describedBy}
              value={fn}
              onChange={(e) => {
                setFn(e.currentTarget.value);
                setInput(exampleBody(functions, e.currentTarget.value));
              }}
            >
              {functions.map((f) => (
                <option key={f.name} value={f.name}>
                  {f.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <Field label="Request body (JSON: {input, policy?, webhook?})" errors={inputError}>
        {({ id, describedBy, invalid }) => (
          <textarea
            id={id}
            class="mono"
            rows={5}
            aria-describedby={describedBy}
            aria-invalid={invalid}
            value={input}
            onInput={(e) => setInput(e.currentTarget.value)}
          />
        )}
      </Field>
      <fieldset class="inline">
        <legend>Send with</legend>
        <label>
          <input type="radio" name="mode" value="runsync" checked={mode === "runsync"} onChange={() => setMode("runsync")} /> runsync (wait for the result)
        </label>
        <label>
          <input type="radio" name="mode" value="run" checked={mode === "run"} onChange={() => setMode("run")} /> run (queue it, follow below)
        </label>
      </fieldset>
      <div class="actions">
        <button type="submit" disabled={busy}>
          {busy ? "Sending…" : "Send"}
        </button>
      </div>
      <ProblemMessage error={problem} />
      {result && (
        <div class="result" aria-live="polite">
          <h3>
            Result <StatusBadge status={result.status} />
          </h3>
          <Json label="Result" value={result} />
        </div>
      )}
    </form>
  );
}

/** A GPU endpoint's GPU settings and the host's GPUs each of its workers holds (from its /health). */
function EndpointGpus({
  endpoint,
  record,
  health,
}: {
  endpoint: EndpointSummary;
  record: EndpointRecord | null | undefined;
  health: Health | null | undefined;
}) {
  const computeType = record?.computeType ?? endpoint.rest?.computeType ?? (endpoint.gpuTypeIds.length > 0 ? "GPU" : "CPU");
  // Whether this host runs the workers and has no GPU: then they run on its CPU, which the page says.
  const [onCpu, setOnCpu] = useState(false);
  useEffect(() => {
    if (computeType !== "GPU") return;
    api<{ gpus: unknown[]; workersOnHost?: boolean }>("/v1/gpus").then(
      (answer) => setOnCpu(answer.workersOnHost === true && answer.gpus.length === 0),
      () => setOnCpu(false),
    );
  }, [computeType]);
  if (computeType !== "GPU") return null;
  const types = record?.gpuTypeIds ?? endpoint.gpuTypeIds;
  const count = record?.gpuCount ?? endpoint.rest?.gpuCount;
  const workers = health?.gpus && gpusByWorker(health.gpus);
  return (
    <section class="card" aria-labelledby="endpoint-gpus-title">
      <h2 id="endpoint-gpus-title">GPUs</h2>
      {onCpu && (
        <p class="notice warn" role="status" data-field="no-gpus">
          This service's host has no GPU: this GPU endpoint's workers run on its CPU.
        </p>
      )}
      <dl class="facts">
        <dt>Types, in priority order</dt>
        <dd>{types.length > 0 ? <TypeIds ids={types} ordered label="GPU types in priority order" /> : "any GPU of the host"}</dd>
        <dt>GPUs per worker</dt>
        <dd data-field="gpu-count">{count ?? "—"}</dd>
      </dl>
      <h3>Held by its workers</h3>
      {health === undefined ? (
        <p>…</p>
      ) : health === null ? (
        <p class="muted">No status: the endpoint's health could not be read.</p>
      ) : !workers ? (
        <p class="muted">This service does not hand out GPUs here (it found none on its host, or its workers run on other machines).</p>
      ) : workers.length === 0 ? (
        <p class="muted" data-empty="worker-gpus">
          No worker holds a GPU now.
        </p>
      ) : (
        <ul class="worker-gpus" aria-label="GPUs its workers hold">
          {workers.map((w) => (
            <li key={w.workerId} data-worker={w.workerId}>
              <p>
                Worker <span class="mono">{w.workerId}</span>
                {w.typeId && <span class="muted"> as {w.typeId}</span>}
              </p>
              <ul>
                {w.gpus.map((g) => (
                  <li key={g.uuid} data-gpu={g.index}>
                    <p>
                      <strong>GPU {g.index}</strong> <span class="gpu-name">{g.name}</span>
                    </p>
                    <GpuUse gpu={g} />
                    <p class="mono muted">{g.uuid}</p>
                  </li>
                ))}
              </ul>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function LogView({ endpointId, jobId, title }: { endpointId: string; jobId?: string; title: string }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [follow, setFollow] = useState(true);
  const [problem, setProblem] = useState<unknown>(null);
  const boxRef = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const abort = new AbortController();
    setLines([]);
    setProblem(null);
    const query = `${jobId ? `job=${encodeURIComponent(jobId)}&` : ""}${follow ? "follow=1" : ""}`;
    (async () => {
      const response = await request(`/v1/endpoints/${encodeURIComponent(endpointId)}/logs?${query}`, { signal: abort.signal });
      if (!follow) {
        setLines(((await response.json()) as { lines: LogLine[] }).lines.slice(-1000));
        return;
      }
      await readNdjson(response, (l) => setLines((prev) => [...prev.slice(-999), l as LogLine]), abort.signal);
    })().catch((err: unknown) => {
      if (!abort.signal.aborted) setProblem(err);
    });
    return () => abort.abort();
  }, [endpointId, jobId, follow]);
  useEffect(() => {
    const box = boxRef.current;
    if (box && follow) box.scrollTop = box.scrollHeight;
  }, [lines.length]);
  const dropped = lines.reduce((sum, l) => sum + (l.dropped ?? 0), 0);
  return (
    <section class="card" aria-label={title}>
      <div class="page-head">
        <h3>{title}</h3>
        <label class="inline">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} /> Follow live
        </label>
      </div>
      <ProblemMessage error={problem} />
      {dropped > 0 && (
        <p class="notice warn log-dropped-count" role="status">
          {dropped} log line{dropped === 1 ? " was" : "s were"} dropped by the service's log quotas; the marked lines say where and which limit.
        </p>
      )}
      <pre class="logs" ref={boxRef} tabIndex={0} aria-label={`${title} output`} aria-live="off">
        {lines.length === 0
          ? "No log lines yet."
          : lines.map((l, i) => {
              const text = `${new Date(l.ts).toLocaleTimeString()} ${l.workerId}${l.jobId ? ` ${l.jobId}` : ""} [${l.stream}] ${l.text}${i < lines.length - 1 ? "\n" : ""}`;
              return l.stream === "dropped" ? (
                <mark key={i} class="log-dropped">
                  {text}
                </mark>
              ) : (
                text
              );
            })}
      </pre>
    </section>
  );
}

function JobView({
  endpointId,
  jobId,
  summary,
  streams,
  onChanged,
}: {
  endpointId: string;
  jobId: string;
  summary?: JobSummary;
  streams: boolean;
  onChanged(): void;
}) {
  const sectionRef = useRef<HTMLElement>(null);
  // Opened by a click far down the list (or a link): brought into view, unless it already is (beside the list).
  // It is checked again as its record, output and logs arrive and it grows: beside a list scrolled to its end,
  // a taller detail is pushed up by the end of the list.
  useEffect(() => {
    const section = sectionRef.current;
    if (!section) return;
    const bringIntoView = () => {
      const top = section.getBoundingClientRect().top;
      if (top < 0 || top > innerHeight - 80) scrollBy({ top: top - 8 });
    };
    bringIntoView();
    section.querySelector<HTMLElement>("h2")?.focus({ preventScroll: true });
    const observer = new ResizeObserver(bringIntoView);
    observer.observe(section);
    // Only while it opens: afterwards the user scrolls where they like.
    const stop = setTimeout(() => observer.disconnect(), 3000);
    return () => {
      clearTimeout(stop);
      observer.disconnect();
    };
  }, [jobId]);
  const [record, setRecord] = useState<JobRecord | null>(null);
  const [chunks, setChunks] = useState<unknown[]>([]);
  const [problem, setProblem] = useState<unknown>(null);
  const [round, setRound] = useState(0);
  const [actionMessage, setActionMessage] = useState<string | null>(null);
  // Its result expired (/status answers 404): the job's record from the history, when it is kept.
  const [history, setHistory] = useState<JobSummary | null>(null);

  // The recent jobs list refreshes when this job changes state, not only on its own (slower) schedule.
  const onChangedRef = useRef(onChanged);
  onChangedRef.current = onChanged;
  useEffect(() => {
    let stopped = false;
    let lastStatus: string | undefined;
    setChunks([]);
    setHistory(null);
    (async () => {
      let streamDone = false;
      while (!stopped) {
        let rec: JobRecord;
        try {
          rec = await api<JobRecord>(v2(endpointId, `status/${encodeURIComponent(jobId)}`));
        } catch (err) {
          if (!(err instanceof ApiProblem && err.status === 404)) throw err;
          // No result any more: its history record, or the history's own 404 (not kept either).
          const kept = await api<JobSummary>(v2(endpointId, `jobs/${encodeURIComponent(jobId)}`));
          if (!stopped) setHistory(kept);
          return;
        }
        if (stopped) return;
        setRecord(rec);
        if (lastStatus !== undefined && rec.status !== lastStatus) onChangedRef.current();
        lastStatus = rec.status;
        if (!streamDone) {
          // /stream waits up to 1.5 s for a new chunk, so this loop does not spin.
          const s = await api<{ status: string; stream: Array<{ output: unknown }> }>(v2(endpointId, `stream/${encodeURIComponent(jobId)}`));
          if (stopped) return;
          if (s.stream.length > 0) setChunks((c) => [...c, ...s.stream.map((x) => x.output)]);
          if (FINAL_STATES.has(s.status) && s.stream.length === 0) streamDone = true;
        } else if (FINAL_STATES.has(rec.status)) return;
        else await sleep(1000);
      }
    })().catch((err: unknown) => {
      if (!stopped) setProblem(err);
    });
    return () => {
      stopped = true;
    };
  }, [endpointId, jobId, round]);

  const act = async (action: "cancel" | "retry") => {
    setProblem(null);
    try {
      const answer = await api<{ id: string; status: string }>(v2(endpointId, `${action}/${encodeURIComponent(jobId)}`), { method: "POST" });
      setActionMessage(`${action === "cancel" ? "Cancelled" : "Queued again"}: ${answer.status}`);
      setRound((r) => r + 1);
      onChanged();
    } catch (err) {
      setProblem(err);
    }
  };
  const status = record?.status ?? "";
  // The job API's rules: cancel while queued or running; retry a FAILED or TIMED_OUT job.
  const canCancel = status === "IN_QUEUE" || status === "IN_PROGRESS";
  const canRetry = status === "FAILED" || status === "TIMED_OUT";
  // /stream hands each chunk out once: a finished streaming job read before (another tab, a client) shows the
  // chunks its output collected.
  const shownChunks = chunks.length === 0 && streams && status === "COMPLETED" && Array.isArray(record?.output) ? (record!.output as unknown[]) : chunks;
  if (history) return <JobHistoryView endpointId={endpointId} job={history} sectionRef={sectionRef} />;
  return (
    <section class="card job" aria-labelledby="job-title" ref={sectionRef} data-job-detail={jobId}>
      <div class="page-head">
        <h2 id="job-title" tabIndex={-1}>
          Job <span class="mono job-id">{jobId}</span> {record && <StatusBadge status={record.status} />}
        </h2>
        <a href={`#/endpoints/${encodeURIComponent(endpointId)}`} aria-label="Close the job">
          Close
        </a>
      </div>
      <p class="hint">
        Its address: <a href={jobHash(endpointId, jobId)}>{`${location.origin}${location.pathname}${jobHash(endpointId, jobId)}`}</a>
      </p>
      <h3>Timeline</h3>
      <dl class="facts timeline" aria-label="Timeline">
        <dt>Submitted</dt>
        <dd data-field="submitted">
          <Time t={summary?.createdAt} />
        </dd>
        <dt>Started</dt>
        <dd data-field="started">
          <Time t={summary?.startedAt} never={record?.status === "IN_QUEUE" ? "waiting in the queue" : "—"} />
        </dd>
        <dt>Ended</dt>
        <dd data-field="ended">
          <Time t={summary?.completedAt} never={record && !FINAL_STATES.has(record.status) ? "not yet" : "—"} />
        </dd>
        {record && (
          <>
            <dt>Delay</dt>
            <dd data-field="delay">{formatMs(record.delayTime)}</dd>
            <dt>Execution</dt>
            <dd data-field="execution">{formatMs(record.executionTime)}</dd>
          </>
        )}
        <dt>Worker</dt>
        <dd class="mono" data-field="worker">
          {summary?.workerId ?? "—"}
        </dd>
      </dl>
      {record && (
        <dl class="facts">
          {record.retries !== undefined && (
            <>
              <dt>Automatic retries</dt>
              <dd>{record.retries}</dd>
            </>
          )}
          {record.attempts !== undefined && (
            <>
              <dt>Attempts</dt>
              <dd>{record.attempts}</dd>
            </>
          )}
        </dl>
      )}
      {/* Only the actions the job API allows the job now. */}
      {(canCancel || canRetry) && (
        <div class="actions">
          {canCancel && (
            <button class="secondary" onClick={() => void act("cancel")}>
              Cancel job
            </button>
          )}
          {canRetry && (
            <button class="secondary" onClick={() => void act("retry")}>
              Retry job
            </button>
          )}
        </div>
      )}
      {actionMessage && (
        <p class="notice" role="status">
          {actionMessage}
        </p>
      )}
      <ProblemMessage error={problem} />
      <h3>Input</h3>
      {summary?.inputOmitted ? (
        <p class="muted">The input is too large to show here.</p>
      ) : summary ? (
        <Json label="Job input" value={summary.input} />
      ) : (
        <p class="muted">…</p>
      )}
      {record?.output !== undefined &&
        (record.status === "IN_PROGRESS" ? (
          // While it runs, the record's output is the latest progress its handler reported (ctx.progress).
          <>
            <h3>Progress</h3>
            <div aria-live="polite">
              <Json label="Job progress" value={record.output} />
            </div>
          </>
        ) : (
          <>
            <h3>Output</h3>
            <Json label="Job output" value={record.output} />
          </>
        ))}
      {record?.error !== undefined && (
        <>
          <h3>Error{record.errorType ? ` (${record.errorType})` : ""}</h3>
          <pre class="json error-text">{record.error}</pre>
          {record.errorStack && (
            <details>
              <summary>Stack</summary>
              <pre class="json">{record.errorStack}</pre>
            </details>
          )}
        </>
      )}
      <h3>Stream</h3>
      {shownChunks.length === 0 ? (
        <p class="muted" data-empty="stream">
          {!FINAL_STATES.has(status) ? "No chunks streamed yet." : "This job streamed no chunks."}
        </p>
      ) : (
        chunks.length === 0 && <p class="hint">Its chunks, from its output (the stream was read before this page opened).</p>
      )}
      <ol class="chunks" aria-label="Stream chunks" aria-live="polite" hidden={shownChunks.length === 0}>
        {shownChunks.map((c, i) => (
          <li key={i} class="mono">
            {JSON.stringify(c)}
          </li>
        ))}
      </ol>
      <WebhookDeliveries endpointId={endpointId} jobId={jobId} />
      <LogView endpointId={endpointId} jobId={jobId} title="Logs of this job" />
    </section>
  );
}

/**
 * A job whose result expired: its history record (status, times, attempts, error, worker) and its logs. No input,
 * output or stream (they went with the result) and no action (the job API knows the job no more).
 */
function JobHistoryView({ endpointId, job, sectionRef }: { endpointId: string; job: JobSummary; sectionRef: { current: HTMLElement | null } }) {
  return (
    <section class="card job" aria-labelledby="job-title" ref={sectionRef} data-job-detail={job.id} data-history="true">
      <div class="page-head">
        <h2 id="job-title" tabIndex={-1}>
          Job <span class="mono job-id">{job.id}</span> <StatusBadge status={job.status} />
        </h2>
        <a href={`#/endpoints/${encodeURIComponent(endpointId)}`} aria-label="Close the job">
          Close
        </a>
      </div>
      <p class="notice" data-field="result-expired">
        Its result expired <Time t={job.resultExpiredAt} />: its input, output and stream are no longer kept. This record is kept until{" "}
        <Time t={job.keptUntil} />.
      </p>
      <h3>Timeline</h3>
      <dl class="facts timeline" aria-label="Timeline">
        <dt>Submitted</dt>
        <dd data-field="submitted">
          <Time t={job.createdAt} />
        </dd>
        <dt>Started</dt>
        <dd data-field="started">
          <Time t={job.startedAt} never="never" />
        </dd>
        <dt>Ended</dt>
        <dd data-field="ended">
          <Time t={job.completedAt} />
        </dd>
        <dt>Delay</dt>
        <dd data-field="delay">{formatMs(job.delayTime)}</dd>
        <dt>Execution</dt>
        <dd data-field="execution">{formatMs(job.executionTime)}</dd>
        <dt>Worker</dt>
        <dd class="mono" data-field="worker">
          {job.workerId ?? "—"}
        </dd>
        <dt>Attempts</dt>
        <dd data-field="attempts">{job.attempts ?? "—"}</dd>
        {job.retries !== undefined && (
          <>
            <dt>Automatic retries</dt>
            <dd>{job.retries}</dd>
          </>
        )}
      </dl>
      {job.error !== undefined && (
        <>
          <h3>Error</h3>
          <pre class="json error-text">{job.error}</pre>
        </>
      )}
      <LogView endpointId={endpointId} jobId={job.id} title="Logs of this job" />
    </section>
  );
}

/** Every failure of the endpoint in the charts' window (the last hour), with its error: result expired or not. */
function Failures({ endpointId, version }: { endpointId: string; version: number }) {
  const [failures, setFailures] = useState<JobSummary[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  usePolling(
    async () => {
      try {
        const since = Date.now() - 3_600_000;
        setFailures((await api<{ jobs: JobSummary[] }>(v2(endpointId, `jobs?status=FAILED,TIMED_OUT&since=${since}&limit=500`))).jobs);
        setProblem(null);
      } catch (err) {
        setProblem(err);
      }
    },
    JOBS_POLL_MS,
    [endpointId, version],
  );
  return (
    <section class="card" aria-labelledby="failures-title" data-section="failures">
      <h2 id="failures-title">Failures in the last hour</h2>
      <ProblemMessage error={problem} />
      {failures === null ? (
        <p>Loading…</p>
      ) : failures.length === 0 ? (
        <p class="muted" data-empty="failures">
          No job failed or timed out in the last hour.
        </p>
      ) : (
        <ListTable label="Failures" columns={["Job", "State", "Ended", "Error"]}>
          {failures.map((j) => (
            <tr key={j.id} data-job={j.id}>
              <th scope="row">
                <a class="mono nowrap" href={jobHash(endpointId, j.id)}>
                  {j.id}
                </a>
                {j.resultExpired && <div class="muted">result expired</div>}
              </th>
              <td>
                <StatusBadge status={j.status} />
              </td>
              <td>
                <Time t={j.completedAt} />
              </td>
              <td class="error-text" data-field="error">
                {j.error ?? "—"}
              </td>
            </tr>
          ))}
        </ListTable>
      )}
    </section>
  );
}

function JobsTable({
  endpointId,
  selected,
  onSelect,
  onJobs,
  version,
}: {
  endpointId: string;
  selected: string | null;
  onSelect(id: string): void;
  onJobs(jobs: JobSummary[]): void;
  version: number;
}) {
  const [jobs, setJobs] = useState<JobSummary[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [purged, setPurged] = useState<string | null>(null);
  const [dialog, confirm] = useConfirm();
  const refresh = usePolling(
    async () => {
      try {
        const loaded = (await api<{ jobs: JobSummary[] }>(v2(endpointId, "jobs?limit=50"))).jobs;
        setJobs(loaded);
        onJobs(loaded);
        setProblem(null);
      } catch (err) {
        setProblem(err);
      }
    },
    // Slow on its own: the jobs this page follows refresh it when they change state (version).
    JOBS_POLL_MS,
    [endpointId, version],
  );
  const purge = () =>
    confirm({
      title: "Purge the queue?",
      body: <p>Every job still waiting in this endpoint's queue is deleted. Running jobs are not touched.</p>,
      confirmLabel: "Purge queue",
      action: async () => {
        try {
          const r = await api<{ removed: number }>(v2(endpointId, "purge-queue"), { method: "POST" });
          setPurged(`Removed ${r.removed} queued job${r.removed === 1 ? "" : "s"}.`);
          refresh();
        } catch (err) {
          setProblem(err);
        }
      },
    });
  return (
    <section class="card" aria-labelledby="jobs-title">
      <div class="page-head">
        <h2 id="jobs-title">Recent jobs</h2>
        <button class="secondary" onClick={purge}>
          Purge queue
        </button>
      </div>
      {dialog}
      {purged && (
        <p class="notice" role="status">
          {purged}
        </p>
      )}
      <ProblemMessage error={problem} />
      {jobs === null ? (
        <p>Loading…</p>
      ) : jobs.length === 0 ? (
        <p class="muted" data-empty="jobs">
          No jobs to show. A finished job's result is kept 30 minutes after its end for `/run`, 1 minute for `/runsync` (or what `/status?ttl=` set); then its
          record (status, times, error) stays listed as history, 7 days unless the operator set otherwise.
        </p>
      ) : (
        <ListTable label="Recent jobs" columns={["Job", "State", "Submitted", "Delay", "Execution"]}>
          {jobs.map((j) => (
            <tr key={j.id} data-job={j.id} class={j.id === selected ? "selected" : undefined}>
              <th scope="row">
                <a class="mono nowrap" href={jobHash(endpointId, j.id)} aria-current={j.id === selected ? "true" : undefined} onClick={() => onSelect(j.id)}>
                  {j.id}
                </a>
              </th>
              <td>
                <StatusBadge status={j.status} />
                {j.resultExpired && <span class="muted"> (result expired)</span>}
              </td>
              <td>
                <Time t={j.createdAt} />
              </td>
              <td>{formatMs(j.delayTime)}</td>
              <td>{formatMs(j.executionTime)}</td>
            </tr>
          ))}
        </ListTable>
      )}
    </section>
  );
}

/** Whether the job's function streams (a generator): its output is then the list of its chunks. */
function streams(endpoint: EndpointSummary, job: JobSummary | undefined): boolean {
  const fns = endpoint.functions ?? [];
  const fn = fns.find((f) => f.name === job?.function) ?? (fns.length === 1 ? fns[0] : undefined);
  return fn !== undefined && fn.kind.startsWith("generator");
}

export function EndpointPage({ id, jobId }: { id: string; jobId?: string }) {
  const [endpoint, setEndpoint] = useState<EndpointSummary | null | undefined>(undefined);
  const [health, setHealth] = useState<Health | null | undefined>(undefined);
  const [record, setRecord] = useState<EndpointRecord | null | undefined>(undefined);
  const selectedJob = jobId ?? null;
  const setSelectedJob = (job: string) => {
    if (job !== jobId) location.hash = jobHash(id, job);
  };
  const [jobsVersion, setJobsVersion] = useState(0);
  const [jobs, setJobs] = useState<JobSummary[]>([]);
  const [editing, setEditing] = useState(false);
  const [saved, setSaved] = useState<string | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [dialog, confirm] = useConfirm();

  const reload = async () => {
    try {
      const { endpoints } = await loadEndpoints();
      setEndpoint(endpoints.find((e) => e.id === id) ?? null);
    } catch (err) {
      setProblem(err);
    }
  };
  useEffect(() => {
    void reload();
  }, [id]);
  // Status (WAITING and why) and the GPUs its workers hold change with the workers: both refresh with the health.
  usePolling(
    async () => {
      const [h, r] = await Promise.all([loadHealth(id), loadRecord(id).catch(() => undefined)]);
      setHealth(h);
      // A failed read keeps what the page showed.
      if (r !== undefined) setRecord(r);
    },
    2000,
    [id],
  );

  const remove = () =>
    confirm({
      title: `Delete endpoint ${endpoint?.name}?`,
      body: <p>The endpoint's configuration, its logs and its job history are deleted, queued jobs are dropped and its workers stop. This cannot be undone.</p>,
      confirmLabel: "Delete endpoint",
      action: async () => {
        try {
          await api(`/v1/endpoints/${encodeURIComponent(id)}`, { method: "DELETE" });
          location.hash = "#/endpoints";
        } catch (err) {
          setProblem(err);
        }
      },
    });

  if (endpoint === undefined) return <p>Loading…</p>;
  if (endpoint === null)
    return (
      <section>
        <h1 tabIndex={-1}>No endpoint {id}</h1>
        <ProblemMessage error={problem} />
        <p>
          <a href="#/endpoints">Back to the endpoints</a>
        </p>
      </section>
    );
  const isQueue = endpoint.type === "queue";
  // The live record where the key may read it; else the list's, and the health's reason for held-back workers.
  const status = record ? record.status : endpoint.status;
  const waitReason = status === "WAITING" ? (record ? record.statusReason : endpoint.statusReason) : health?.throttledReason;
  return (
    <section aria-labelledby="endpoint-title">
      {dialog}
      <p>
        <a href="#/endpoints">← Endpoints</a>
      </p>
      <div class="page-head">
        <h1 id="endpoint-title" tabIndex={-1}>
          {endpoint.name}
        </h1>
        {endpoint.source === "rest" && !editing && (
          <div class="actions">
            <button class="secondary" onClick={() => (setEditing(true), setSaved(null))}>
              Edit
            </button>
            <button class="danger" onClick={remove}>
              Delete
            </button>
          </div>
        )}
      </div>
      <p class="muted">
        <span class="mono">{endpoint.id}</span> ·{" "}
        {endpoint.source === "app" ? `app ${endpoint.app}, environment ${endpoint.env} (changed by svc deploy)` : "created in the console / REST API"}
        {endpoint.type === "lb" && " · load-balanced (no job API)"}
      </p>
      {waitReason && (
        <p class="notice warn" role="status" data-status="waiting">
          WAITING: <span data-field="wait-reason">{waitReason}</span>
        </p>
      )}
      <ProblemMessage error={problem} />
      <Notice text={saved} />
      {editing && endpoint.rest && (
        <EndpointForm
          existing={endpoint.rest}
          onSaved={(e, restarted) => {
            setEditing(false);
            setSaved(`Saved ${e.name}.${restarted ? " Its workers are restarting with the new settings." : " Workers kept running."}`);
            void reload();
          }}
          onCancel={() => setEditing(false)}
        />
      )}
      {isQueue ? (
        <ListTable label="Status" columns={["Workers now", "Queued", "In progress", "Cold starts"]}>
          <tr>
            <HealthCells health={health} />
          </tr>
        </ListTable>
      ) : (
        <ListTable label="Status" columns={["Workers now", "Waiting for a worker", "In flight", "Cold starts"]}>
          <tr>
            <HealthCells health={health} lb />
          </tr>
        </ListTable>
      )}
      {health?.storage && !health.storage.ok && (
        <div class="start-error" role="alert">
          <p>
            <strong>The service cannot write its storage ({health.storage.cause})</strong> since{" "}
            {new Date(health.storage.since ?? Date.now()).toLocaleTimeString()}: new jobs are refused (503) and results wait until it clears.
          </p>
        </div>
      )}
      {health?.crashLoop && (
        <div class="start-error crash-loop" role="alert">
          <p>
            <strong>{crashLoopText(health.crashLoop, Date.now()).headline}</strong>
          </p>
          <p>{crashLoopText(health.crashLoop, Date.now()).next} The workers' lines (Logs) say why they end.</p>
        </div>
      )}
      {health?.lastStartError && (health.workers.unhealthy ?? 0) > 0 && (
        <div class="start-error" role="alert">
          <p>
            <strong>{health.workers.unhealthy} worker(s) failed to start in the last 5 minutes</strong> (last at{" "}
            {new Date(health.lastStartError.at).toLocaleTimeString()}):
          </p>
          <pre>{health.lastStartError.message}</pre>
        </div>
      )}
      {health &&
        (isQueue ? (
          <p class="muted">
            {health.jobs.completed} completed, {health.jobs.failed} failed, {health.jobs.retried} retried since the endpoint was created.
          </p>
        ) : (
          <p class="muted" data-field="lb-requests">
            {health.requests?.served ?? 0} requests answered by its workers, {health.requests?.failed ?? 0} failed (no answer in time, or cut) since the service
            started.
          </p>
        ))}
      <div class="overview">
        <EndpointAccess endpoint={endpoint} />
        <EndpointSettings endpoint={endpoint} record={record} />
      </div>
      <EndpointWorkers health={health} record={record} />
      <EndpointGpus endpoint={endpoint} record={record} health={health} />
      {endpoint.source === "app" && endpoint.app && endpoint.env && <Releases app={endpoint.app} env={endpoint.env} />}
      <EndpointCharts endpointId={id} />
      {isQueue && (
        <div class="job-layout">
          <div class="try">
            <TryIt
              endpointId={id}
              functions={endpoint.functions ?? []}
              onJob={(jobId) => {
                setSelectedJob(jobId);
                setJobsVersion((v) => v + 1);
              }}
            />
          </div>
          <div class="detail">
            {selectedJob ? (
              <JobView
                key={selectedJob}
                endpointId={id}
                jobId={selectedJob}
                summary={jobs.find((j) => j.id === selectedJob)}
                streams={streams(
                  endpoint,
                  jobs.find((j) => j.id === selectedJob),
                )}
                onChanged={() => setJobsVersion((v) => v + 1)}
              />
            ) : (
              <p class="card muted">Select a job to see its input, output, stream, timeline and logs.</p>
            )}
          </div>
          <div class="jobs">
            <JobsTable endpointId={id} selected={selectedJob} onSelect={setSelectedJob} onJobs={setJobs} version={jobsVersion} />
            <Failures endpointId={id} version={jobsVersion} />
          </div>
        </div>
      )}
      <LogView endpointId={id} title="Endpoint logs" />
    </section>
  );
}
