import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import { Gauge, Registry } from 'prom-client'
import { CounterVec } from './series.js'

// The process's metrics registry, which outlives a reloaded configuration and is summed over the
// workers when scraped, with what belongs to the process itself: event-loop lag, reloads and the
// configuration in use. The figures of calls are the metrics plugin's (plugins/metrics.ts), in
// this same registry, as any plugin's own series are.

export class Metrics {
  readonly registry = new Registry()
  readonly reloads = new CounterVec('modelgate_config_reloads_total', 'Configuration reloads, by result (ok, invalid)', ['result']).register(this.registry)
  private generation = 1
  private readonly loop: IntervalHistogram

  constructor () {
    this.loop = monitorEventLoopDelay({ resolution: 10 })
    this.loop.enable()
    const loop = this.loop
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'modelgate_event_loop_lag_seconds',
      help: 'Event-loop delay since the previous scrape (p50, p99, max)',
      labelNames: ['stat'],
      registers: [this.registry],
      aggregator: 'max',
      collect () {
        this.set({ stat: 'p50' }, loop.percentile(50) / 1e9)
        this.set({ stat: 'p99' }, loop.percentile(99) / 1e9)
        this.set({ stat: 'max' }, loop.max / 1e9)
        loop.reset()
      }
    })
    const self = this
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'modelgate_config_generation',
      help: 'The configuration in use: 1 at start, one more for each reload that succeeded',
      registers: [this.registry],
      aggregator: 'max',
      collect () { this.set(self.generation) }
    })
  }

  reloaded (ok: boolean, generation?: number): void {
    this.reloads.inc([ok ? 'ok' : 'invalid'])
    if (generation !== undefined) this.generation = generation
  }

  async text (): Promise<string> { return await this.registry.metrics() }

  get contentType (): string { return this.registry.contentType }

  close (): void { this.loop.disable() }
}
