import type { Metric, Registry } from 'prom-client'

// Counters and histograms with labels, for the per-call figures. prom-client's own hash the
// labels object on every update; these keep each label combination's numbers in a map keyed by
// the joined values, so that a call's updates cost a string join and a lookup each. They expose
// themselves to a prom-client Registry through the same get() its metrics have, so the text
// format and the cluster aggregation are prom-client's.

type Labels = Record<string, string | number>

/** What prom-client's registry reads of a metric (the shape of its own metrics' get()). */
export interface MetricJson {
  name: string
  help: string
  type: 'counter' | 'histogram'
  aggregator: 'sum'
  values: Array<{ labels: Labels, value: number, metricName?: string }>
}

const SEP = '\u0001'

interface CounterSeries { labels: Labels, value: number }
interface HistogramSeries { labels: Labels, counts: Float64Array, sum: number, count: number }

abstract class Vec<S> {
  readonly aggregator = 'sum' as const
  protected readonly series = new Map<string, S>()

  constructor (readonly name: string, readonly help: string, readonly labelNames: readonly string[]) {}

  /** The series of these label values (in the order of labelNames). */
  protected at (values: ReadonlyArray<string | number>): S {
    const key = values.length === 1 ? String(values[0]) : values.join(SEP)
    let s = this.series.get(key)
    if (s === undefined) {
      const labels: Labels = {}
      this.labelNames.forEach((n, i) => { labels[n] = values[i] ?? '' })
      s = this.make(labels)
      this.series.set(key, s)
    }
    return s
  }

  protected abstract make (labels: Labels): S

  reset (): void { this.series.clear() }

  abstract get (): Promise<MetricJson>

  register (registry: Registry): this {
    registry.registerMetric(this as unknown as Metric)
    return this
  }
}

export class CounterVec extends Vec<CounterSeries> {
  readonly type = 'counter' as const

  protected make (labels: Labels): CounterSeries { return { labels, value: 0 } }

  inc (values: ReadonlyArray<string | number>, by = 1): void { this.at(values).value += by }

  /** The current value of a series (tests). */
  value (values: ReadonlyArray<string | number>): number { return this.series.get(values.join(SEP))?.value ?? 0 }

  async get (): Promise<MetricJson> {
    const values: MetricJson['values'] = []
    for (const s of this.series.values()) values.push({ labels: s.labels, value: s.value })
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}

export class HistogramVec extends Vec<HistogramSeries> {
  readonly type = 'histogram' as const

  constructor (name: string, help: string, labelNames: readonly string[], readonly buckets: readonly number[]) {
    super(name, help, labelNames)
  }

  protected make (labels: Labels): HistogramSeries { return { labels, counts: new Float64Array(this.buckets.length), sum: 0, count: 0 } }

  observe (values: ReadonlyArray<string | number>, v: number): void {
    const s = this.at(values)
    s.sum += v
    s.count++
    const b = this.buckets
    for (let i = 0; i < b.length; i++) {
      if (v <= (b[i] as number)) { s.counts[i]++; break }
    }
  }

  async get (): Promise<MetricJson> {
    const values: MetricJson['values'] = []
    for (const s of this.series.values()) {
      let acc = 0
      this.buckets.forEach((le, i) => {
        acc += s.counts[i] as number
        values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le }, value: acc })
      })
      values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count })
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum })
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}
