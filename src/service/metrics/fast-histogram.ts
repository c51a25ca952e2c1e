// A histogram whose observation is a bucket search and three additions, for the job API's hot path (prom-client's
// own Histogram validates and hashes its label object on every observation: several microseconds, a few percent
// of a /run). It registers in prom-client's Registry as a metric of its own, which writes it in the text format
// with every other metric; each series is looked up once by its caller (`series`) and kept.

import type { Registry } from "prom-client";

export interface HistogramSeries {
  observe(value: number): void;
}

class Series implements HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Record<string, string>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export class FastHistogram<L extends string> {
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly all = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly L[],
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  /** The series of these label values (made on first use). */
  series(labels: Record<L, string>): HistogramSeries {
    const key = this.labelNames.map((n) => labels[n]).join("\u0000");
    let s = this.all.get(key);
    if (!s) this.all.set(key, (s = new Series({ ...labels }, this.bounds)));
    return s;
  }

  /** Drop the series whose labels include these values. */
  remove(match: Partial<Record<L, string>>): void {
    for (const [key, s] of this.all) if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) this.all.delete(key);
  }

  reset(): void {
    this.all.clear();
  }

  /** In the shape prom-client's Registry writes (its own Histogram's get()). */
  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const s of this.all.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += s.counts[i]!;
        values.push({ labels: { ...s.labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { ...s.labels, le: "+Inf" }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
