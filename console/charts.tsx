// The charts of an endpoint page and of the home page: requests, delay and execution percentiles, cold starts,
// queue depth and workers by state, for the last hour or the last day, drawn with uPlot (small, no
// dependencies; canvas). Each chart says its numbers in a sentence beside it, for screen readers and tests.

import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { api } from "./api.js";
import {
  chartSpecs,
  formatDuration,
  isolated,
  formatNumber,
  METRICS_OFF_TEXT,
  metricsTurnedOff,
  WINDOW_TEXT,
  type ChartSpec,
  type MetricsSeries,
  type MetricsWindow,
} from "./charts-data.js";
import { ProblemMessage, useId, usePolling } from "./ui.js";

/** Line colours, each at least 4.5:1 on the panel background. */
const COLOURS = ["#0b5cad", "#b42318", "#1a7f37", "#8250df", "#9a6700", "#57606a"];
const HEIGHT = 150;
/** The series behind the charts change by the minute; every 15 s keeps the last point current enough. */
const REFRESH_MS = 15_000;

function axisValue(unit: ChartSpec["unit"], v: number): string {
  return unit === "ms" ? formatDuration(v) : formatNumber(v);
}

/** A tick of the time axis (seconds since the epoch) as the viewer's "HH:MM". */
function clockTime(seconds: number): string {
  const d = new Date(seconds * 1000);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

function options(spec: ChartSpec, width: number): uPlot.Options {
  const format = (v: number | null | undefined) => (v === null || v === undefined ? "—" : axisValue(spec.unit, v));
  return {
    width,
    height: HEIGHT,
    series: [
      {},
      ...spec.labels.map((label, i) => ({
        label,
        stroke: COLOURS[i % COLOURS.length],
        fill: spec.bars ? `${COLOURS[i % COLOURS.length]}99` : undefined,
        width: spec.bars ? 0 : 2,
        paths: spec.bars ? uPlot.paths.bars!({ size: [0.7, 24] }) : undefined,
        // A value between gaps (no job ended, not yet sampled) shows as a dot: a line cannot draw it.
        points: { show: !spec.bars, size: 6, filter: (u: uPlot, seriesIdx: number) => isolated(Array.from(u.data[seriesIdx] ?? [])) },
        value: (_u: uPlot, v: number | null) => format(v),
      })),
    ],
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(max ?? 0, spec.unit === "ms" ? 10 : 1) * 1.1] } },
    // Counts (cold starts, workers, jobs queued) are whole: a tick at 0.5 would only mislead, so it has no label.
    axes: [
      // Times as "13:05" (a day fits in a 24-hour clock, so no date), with room for each: uPlot's default labels
      // ("12:10pm" and a date line) ran into each other at desktop widths.
      {
        stroke: "#57606a",
        space: 72,
        grid: { stroke: "#d8dee4", width: 1 },
        ticks: { stroke: "#d8dee4", width: 1 },
        values: (_u, vals) => vals.map(clockTime),
      },
      {
        stroke: "#57606a",
        size: 64,
        grid: { stroke: "#d8dee4", width: 1 },
        ticks: { stroke: "#d8dee4", width: 1 },
        values: (_u, vals) => vals.map((v) => (spec.unit === "count" && !Number.isInteger(v) ? "" : axisValue(spec.unit, v))),
      },
    ],
    // Room on the right for the last time label, which is centred on its tick.
    padding: [8, 24, 0, 0],
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
  };
}

function Chart({ spec }: { spec: ChartSpec }) {
  const holder = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const titleId = useId("chart");
  const data = [spec.x, ...spec.ys] as uPlot.AlignedData;
  // One plot per chart shape (its series): new data is set on it; it follows the container's width.
  const shape = `${spec.key}:${spec.labels.join(",")}`;
  useEffect(() => {
    const el = holder.current!;
    const p = new uPlot(options(spec, Math.max(100, el.clientWidth)), data, el);
    plot.current = p;
    const resize = new ResizeObserver(() => p.setSize({ width: Math.max(100, el.clientWidth), height: HEIGHT }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      p.destroy();
      plot.current = null;
    };
  }, [shape]);
  useEffect(() => {
    plot.current?.setData(data);
  }, [spec]);
  return (
    <figure class="chart" data-chart={spec.key} aria-labelledby={titleId} aria-describedby={`${titleId}-summary`}>
      <figcaption>
        <h3 id={titleId}>{spec.title}</h3>
      </figcaption>
      <div class="chart-plot" ref={holder} aria-hidden="true" />
      <p class="chart-summary" id={`${titleId}-summary`}>
        {spec.summary}
      </p>
    </figure>
  );
}

/** The charts of one metrics route (`/v1/endpoints/{id}/metrics`, or `/v1/metrics` for all endpoints). */
export function MetricsCharts({ path, title = "Charts", note }: { path: string; title?: string; note?: string }) {
  const [span, setSpan] = useState<MetricsWindow>("1h");
  const [series, setSeries] = useState<MetricsSeries | null>(null);
  const [error, setError] = useState<unknown>(null);
  const headingId = useId("charts");
  usePolling(
    async () => {
      try {
        setSeries(await api<MetricsSeries>(`${path}?window=${span}`));
        setError(null);
      } catch (err) {
        setError(err);
      }
    },
    REFRESH_MS,
    [path, span],
  );
  // A window just chosen shows nothing of the previous one while it loads.
  const shown = series?.window === span ? series : null;
  return (
    <section class="card charts" aria-labelledby={headingId} data-section="charts" data-window={span}>
      <div class="charts-head">
        <h2 id={headingId}>{title}</h2>
        <div class="toggle" role="group" aria-label="Time window">
          {(["1h", "1d"] as const).map((w) => (
            <button key={w} type="button" class="secondary" aria-pressed={w === span} onClick={() => setSpan(w)}>
              {w === "1h" ? "Last hour" : "Last day"}
            </button>
          ))}
        </div>
      </div>
      {note && <p class="muted">{note}</p>}
      {metricsTurnedOff(error) ? (
        <p class="notice" role="status" data-metrics="off">
          {METRICS_OFF_TEXT}
        </p>
      ) : (
        <ProblemMessage error={error} />
      )}
      {shown === null ? (
        !error && <p class="muted">Loading {WINDOW_TEXT[span]}…</p>
      ) : (
        <div class="chart-grid" data-loaded={shown.window}>
          {chartSpecs(shown).map((spec) => (
            <Chart key={spec.key} spec={spec} />
          ))}
        </div>
      )}
    </section>
  );
}
