import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import { Gauge, Registry } from 'prom-client'
import type { CallOutcome, Endpoint } from '../../api/index.js'
import { nanoToUsd } from '../../gateway/money.js'
import type { Store } from '../../store/types.js'
import type { BreakerState, HealthBook } from '../../upstream/health.js'
import type { AttemptReport } from '../../upstream/index.js'
import { CounterVec, HistogramVec } from './series.js'

// The process's metrics, in one prom-client registry that outlives a reloaded configuration.
// Per-call figures come from each call's outcome (the gateway's own end-of-call subscription,
// not a plugin of the chain); per-attempt ones from the upstream reports; the rest (breaker
// states, balance holds, event-loop lag) is read when scraped. Names follow the OpenTelemetry
// GenAI conventions where there is one (gen_ai.client.token.usage, gen_ai.server.request.duration,
// gen_ai.server.time_to_first_token, as Prometheus writes them), modelgate_* otherwise.

// the OpenTelemetry GenAI advisory buckets
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]
const BATCH_SECONDS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1]
const BATCH_WRITES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

const STATES: readonly BreakerState[] = ['closed', 'half_open', 'open']

const operationOf = (_endpoint: Endpoint): string => 'chat'

export class Metrics {
  readonly registry = new Registry()
  readonly requests = new CounterVec('modelgate_requests_total', 'Calls by route, model, provider, outcome and HTTP status', ['route', 'model', 'provider', 'status', 'code']).register(this.registry)
  readonly tokens = new HistogramVec('gen_ai_client_token_usage', 'Tokens per call by type (input, cached_input, output)', ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'gen_ai_token_type'], TOKEN_BUCKETS).register(this.registry)
  readonly duration = new HistogramVec('gen_ai_server_request_duration_seconds', 'Call duration, from the request to the last byte of the answer', ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'route', 'status'], DURATION_BUCKETS).register(this.registry)
  readonly ttft = new HistogramVec('gen_ai_server_time_to_first_token_seconds', 'Time from the request to the first byte of the answer', ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'route', 'stream'], TTFT_BUCKETS).register(this.registry)
  readonly overhead = new HistogramVec('modelgate_overhead_seconds', 'The gateway\'s own time per call, the providers\' time excluded (streams: up to the first byte)', ['route', 'stream'], OVERHEAD_BUCKETS).register(this.registry)
  readonly cost = new CounterVec('modelgate_cost_usd_total', 'Billed cost by organization, USD', ['org']).register(this.registry)
  readonly attempts = new CounterVec('modelgate_upstream_attempts_total', 'Requests sent to providers, by how they went', ['provider', 'outcome']).register(this.registry)
  readonly upstreamTtfb = new HistogramVec('modelgate_upstream_ttfb_seconds', 'Time for a provider to start answering (headers)', ['provider'], TTFT_BUCKETS).register(this.registry)
  readonly retries = new CounterVec('modelgate_upstream_retries_total', 'Repeats on the same provider after a failure safe to repeat', ['provider']).register(this.registry)
  readonly failovers = new CounterVec('modelgate_upstream_failovers_total', 'Calls moved to another provider after a failure, by model and the provider moved to', ['model', 'provider']).register(this.registry)
  readonly transitions = new CounterVec('modelgate_breaker_transitions_total', 'Circuit breaker changes by provider and the state entered', ['provider', 'state']).register(this.registry)
  readonly reloads = new CounterVec('modelgate_config_reloads_total', 'Configuration reloads, by result (ok, invalid)', ['result']).register(this.registry)
  readonly writeSeconds = new HistogramVec('modelgate_store_write_batch_seconds', 'Time to commit one batch of store writes', [], BATCH_SECONDS).register(this.registry)
  readonly writeSizes = new HistogramVec('modelgate_store_write_batch_writes', 'Writes per committed batch', [], BATCH_WRITES).register(this.registry)
  private readonly healthBooks = new Set<HealthBook>()
  private readonly stores = new Set<Store>()
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
    const books = this.healthBooks
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'modelgate_breaker_state',
      help: 'Providers\' circuit breakers: 1 for the state each is in (summed over workers: how many are in it)',
      labelNames: ['provider', 'state'],
      registers: [this.registry],
      collect () {
        this.reset()
        for (const book of books) {
          for (const h of book.all()) for (const s of STATES) this.set({ provider: h.id, state: s }, h.state === s ? 1 : 0)
        }
      }
    })
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'modelgate_provider_ttfb_average_seconds',
      help: 'The moving average of each provider\'s time to first byte that latency routing ranks by',
      labelNames: ['provider'],
      registers: [this.registry],
      aggregator: 'average',
      collect () {
        this.reset()
        for (const book of books) for (const h of book.all()) if (h.ttfbMs !== null) this.set({ provider: h.id }, h.ttfbMs / 1000)
      }
    })
    const stores = this.stores
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'modelgate_balance_held_usd',
      help: 'Balance held for calls in progress, by organization (read from the store when scraped)',
      labelNames: ['org'],
      registers: [this.registry],
      aggregator: 'max',
      async collect () {
        this.reset()
        for (const store of stores) {
          for (const org of await store.orgs.list()) if (org.held_nano !== 0) this.set({ org: org.id }, Number(nanoToUsd(org.held_nano)))
        }
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

  /** A call ended: its counts, tokens, durations and cost. */
  call (o: CallOutcome): void {
    const model = o.model ?? ''
    const provider = o.provider ?? ''
    this.requests.inc([o.endpoint, model, provider, o.status, o.httpStatus])
    if (o.overheadMs !== null) this.overhead.observe([o.endpoint, o.stream ? 'true' : 'false'], o.overheadMs / 1000)
    if (!o.attempted) return
    const op = operationOf(o.endpoint)
    this.duration.observe([op, provider, model, o.endpoint, o.status], (o.endedAt - o.startedAt) / 1000)
    if (o.firstByteAt !== null) this.ttft.observe([op, provider, model, o.endpoint, o.stream ? 'true' : 'false'], (o.firstByteAt - o.startedAt) / 1000)
    if (!o.billed) return
    const u = o.usage
    this.tokens.observe([op, provider, model, 'input'], u.prompt_tokens)
    if (u.cached_input_tokens > 0) this.tokens.observe([op, provider, model, 'cached_input'], u.cached_input_tokens)
    this.tokens.observe([op, provider, model, 'output'], u.completion_tokens)
    if (o.costNano > 0 && o.principal !== null) this.cost.inc([o.principal.org], o.costNano / 1e9)
  }

  /** An attempt at a provider ended. */
  attempt (r: AttemptReport): void {
    this.attempts.inc([r.provider, r.outcome])
    if (r.status !== null) this.upstreamTtfb.observe([r.provider], (r.end - r.start) / 1000)
    if (r.retry) this.retries.inc([r.provider])
    if (r.failover) this.failovers.inc([r.model ?? '', r.provider])
  }

  /** Breaker states (read when scraped) and their changes (counted). */
  watchHealth (book: HealthBook): void {
    if (this.healthBooks.has(book)) return
    this.healthBooks.add(book)
    book.onState((id, state) => { this.transitions.inc([id, state]) })
  }

  /** Balance holds (read when scraped) and the commit time of write batches, where the store tells it. */
  watchStore (store: Store): void {
    if (this.stores.has(store)) return
    this.stores.add(store)
    store.observeWrites?.((seconds, writes) => {
      this.writeSeconds.observe([], seconds)
      this.writeSizes.observe([], writes)
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
