// The top of an endpoint's page: how to call it (its URL and a ready-to-paste curl), its settings, its workers
// one by one, and its charts (its environment's releases are the shared Releases component).

import { Fragment, type ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { EndpointRecord, EndpointSummary, Health } from "../endpoints-data.js";
import { API_KEY_PLACEHOLDER, endpointCurl } from "../forms.js";
import { formatMs, ListTable, Notice, Time } from "../ui.js";
import { TypeIds } from "./gpus.js";
import { MetricsCharts } from "../charts.js";

/** Its address and a curl that gets an answer once the key is in the environment. */
export function EndpointAccess({ endpoint }: { endpoint: EndpointSummary }) {
  const url = endpoint.url ?? `${location.origin}/v2/${endpoint.id}`;
  const curl = endpointCurl({ type: endpoint.type, url, functions: endpoint.functions, routes: endpoint.deployed?.routes });
  const [copied, setCopied] = useState<string | null>(null);
  const copy = async (e: Event) => {
    try {
      await navigator.clipboard.writeText(curl);
      setCopied("Copied to the clipboard.");
    } catch {
      // No clipboard permission (plain http on another host): select it for Ctrl+C.
      const pre = (e.currentTarget as HTMLElement).closest("section")?.querySelector("pre");
      if (pre) getSelection()?.selectAllChildren(pre);
      setCopied("Selected: press Ctrl+C (⌘C) to copy.");
    }
  };
  return (
    <section class="card" aria-labelledby="access-title">
      <h2 id="access-title">Call it</h2>
      <dl class="facts">
        <dt>URL</dt>
        <dd class="mono" data-field="url">
          {url}
        </dd>
      </dl>
      <div class="page-head">
        <h3>curl</h3>
        <button type="button" class="secondary" onClick={(e) => void copy(e)}>
          Copy curl
        </button>
      </div>
      <pre class="json" aria-label="curl command" tabIndex={0}>
        {curl}
      </pre>
      <p class="hint">
        Set <code>{API_KEY_PLACEHOLDER.slice(1)}</code> to an API key first (<a href="#/keys">API keys</a>), as the CLI's printed commands expect.
      </p>
      <Notice text={copied} />
    </section>
  );
}

function scalingText(scaler: { type: string; value: number } | null | undefined, maxConcurrency: number | undefined, lb: boolean): string {
  if (lb) return `a worker per ${maxConcurrency ?? 1} request(s) in flight or waiting`;
  if (!scaler) return `default: a worker per ${maxConcurrency ?? 1} job(s) queued or running`;
  return scaler.type === "QUEUE_DELAY"
    ? `QUEUE_DELAY ${scaler.value}: add a worker when a job waited ${scaler.value} s`
    : `${scaler.type} ${scaler.value}: ${scaler.value} job(s) per worker`;
}

/** What it was deployed (or created) with: the app's manifest or the REST record. */
export function EndpointSettings({ endpoint, record }: { endpoint: EndpointSummary; record: EndpointRecord | null | undefined }) {
  const d = endpoint.deployed;
  const r = endpoint.rest;
  const computeType = d?.computeType ?? r?.computeType ?? record?.computeType ?? (endpoint.gpuTypeIds.length > 0 ? "GPU" : "CPU");
  const gpuCount = d?.gpuCount ?? r?.gpuCount ?? record?.gpuCount;
  const executionTimeoutMs = d?.executionTimeoutMs ?? r?.executionTimeoutMs;
  const scaler = d ? d.scaler : r?.scalerType ? { type: r.scalerType, value: r.scalerValue ?? 0 } : undefined;
  const secrets = d?.secrets;
  // A load-balanced endpoint has requests, not jobs: no retries, and its concurrency is requests per worker.
  const lb = endpoint.type === "lb";
  const rows: Array<[string, ComponentChildren, string] | false> = [
    ["Compute", computeType === "GPU" ? `GPU, ${gpuCount ?? 1} per worker` : "CPU", "compute"],
    [
      "GPU types",
      computeType !== "GPU" ? (
        "—"
      ) : endpoint.gpuTypeIds.length > 0 ? (
        <TypeIds ids={endpoint.gpuTypeIds} ordered label="GPU types of its settings" />
      ) : (
        "any GPU of the host"
      ),
      "gpu-types",
    ],
    ["Workers", `min ${endpoint.workersMin}, max ${endpoint.workersMax}`, "workers"],
    ["Idle timeout", `${d?.idleTimeout ?? r?.idleTimeout ?? "—"} s`, "idle-timeout"],
    ["Execution timeout", executionTimeoutMs === undefined ? "—" : executionTimeoutMs === 0 ? "none" : formatMs(executionTimeoutMs), "execution-timeout"],
    ["Scaling", scaler === undefined && !lb ? "—" : scalingText(scaler, d?.maxConcurrency, lb), "scaling"],
    [lb ? "Requests per worker" : "Jobs per worker", d?.maxConcurrency ?? "—", "concurrency"],
    !lb && ["Retries", d?.retries ?? "—", "retries"],
    [
      "Secrets",
      secrets === undefined ? (
        "—"
      ) : secrets.length === 0 ? (
        "none"
      ) : (
        <ul class="chips">
          {secrets.map((s) => (
            <li key={s}>
              <a href="#/secrets">
                <code class="chip">{s}</code>
              </a>
            </li>
          ))}
        </ul>
      ),
      "secrets",
    ],
  ];
  return (
    <section class="card" aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <dl class="facts">
        {rows
          .filter((row) => row !== false)
          .map(([label, value, field]) => (
            <Fragment key={field}>
              <dt>{label}</dt>
              <dd data-field={field}>{value}</dd>
            </Fragment>
          ))}
      </dl>
      {endpoint.source === "app" && <p class="hint">Changed by `svc deploy` (the settings in the endpoint's code), not here.</p>}
    </section>
  );
}

/** Each worker: state, since when, the GPUs it holds. */
export function EndpointWorkers({ health, record }: { health: Health | null | undefined; record: EndpointRecord | null | undefined }) {
  const list = health?.workerList;
  const gpusOf = (workerId: string) => {
    const held = (health?.gpus ?? []).filter((g) => g.holder && "workerId" in g.holder && g.holder.workerId === workerId);
    const type = record?.workers?.find((w) => w.workerId === workerId)?.gpuType;
    if (held.length === 0) return type ?? "—";
    return `${held.map((g) => `GPU ${g.index} ${g.name}`).join(", ")}${type ? ` (as ${type})` : ""}`;
  };
  return (
    <section class="card" aria-labelledby="workers-title">
      <h2 id="workers-title">Workers</h2>
      {health === undefined ? (
        <p>…</p>
      ) : !list ? (
        <p class="muted">No worker list: the endpoint's health could not be read.</p>
      ) : list.length === 0 ? (
        <p class="muted" data-empty="workers">
          No workers now: one starts when a job comes (or as many as the minimum say).
        </p>
      ) : (
        <ListTable label="Workers" columns={["Worker", "State", "Since", "GPU"]}>
          {list.map((w) => (
            <tr key={w.id} data-worker={w.id}>
              <th scope="row">
                <span class="mono nowrap">{w.id}</span>
              </th>
              <td>
                <span class={`badge worker-${w.state}`}>{w.state}</span>
                {w.draining && <span class="muted"> (draining)</span>}
              </td>
              <td>
                <Time t={w.since} />
              </td>
              <td>{gpusOf(w.id)}</td>
            </tr>
          ))}
        </ListTable>
      )}
    </section>
  );
}

/** The endpoint's charts: requests, delay and execution, cold starts, queue and workers over the last hour or day. */
export function EndpointCharts({ endpointId }: { endpointId: string }) {
  return <MetricsCharts path={`/v1/endpoints/${encodeURIComponent(endpointId)}/metrics`} />;
}
