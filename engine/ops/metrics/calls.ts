import { Gauge, type Registry } from 'prom-client'
import { nanoToUsd, type AttemptReport, type CallOutcome, type Store } from '../../../plugins/api/index.js'
import { operationOf } from '../gen-ai-operation.js'
import type { BreakerState, HealthBook } from '../../upstream/health.js'
import { CounterVec, HistogramVec } from './series.js'

// The metrics plugin's series, in the process's prom-client registry (which outlives a reloaded
// configuration: the series are made once per registry and found again by the next
// configuration's plugin). Per-call figures come from each call's outcome, its attempts included;
// the rest (breaker states, balance holds) is read when scraped. Names follow the OpenTelemetry
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

export class CallMetrics {
  readonly requests
  readonly tokens
  readonly duration
  readonly ttft
  readonly overhead
  readonly cost
  readonly attempts
  readonly upstreamTtfb
  readonly retries
  readonly failovers
  readonly transitions
  readonly writeSeconds
  readonly writeSizes
  readonly toolCalls
  readonly clamped
  readonly fallbacks
  private readonly healthBooks = new Set<HealthBook>()
  private readonly stores = new Set<Store>()

  constructor (registry: Registry) {
    this.requests = new CounterVec('modelgate_requests_total', 'Calls by route, model, provider, outcome and HTTP status', ['route', 'model', 'provider', 'status', 'code']).register(registry)
    this.tokens = new HistogramVec('gen_ai_client_token_usage', 'Tokens per call by type (input, cached_input, output)', ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'gen_ai_token_type'], TOKEN_BUCKETS).register(registry)
    this.duration = new HistogramVec('gen_ai_server_request_duration_seconds', 'Call duration, from the request to the last byte of the answer', ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'route', 'status'], DURATION_BUCKETS).register(registry)
    this.ttft = new HistogramVec('gen_ai_server_time_to_first_token_seconds', 'Time from the request to the first byte of the answer', ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'route', 'stream'], TTFT_BUCKETS).register(registry)
    this.overhead = new HistogramVec('modelgate_overhead_seconds', 'The gateway\'s own time per call, the providers\' time excluded (streams: up to the first byte)', ['route', 'stream'], OVERHEAD_BUCKETS).register(registry)
    this.cost = new CounterVec('modelgate_cost_usd_total', 'Billed cost by organization, USD', ['org']).register(registry)
    this.attempts = new CounterVec('modelgate_upstream_attempts_total', 'Requests sent to providers, by how they went', ['provider', 'outcome']).register(registry)
    this.upstreamTtfb = new HistogramVec('modelgate_upstream_ttfb_seconds', 'Time for a provider to start answering (headers)', ['provider'], TTFT_BUCKETS).register(registry)
    this.retries = new CounterVec('modelgate_upstream_retries_total', 'Repeats on the same provider after a failure safe to repeat', ['provider']).register(registry)
    this.failovers = new CounterVec('modelgate_upstream_failovers_total', 'Calls moved to another provider after a failure, by model and the provider moved to', ['model', 'provider']).register(registry)
    this.transitions = new CounterVec('modelgate_breaker_transitions_total', 'Circuit breaker changes by provider and the state entered', ['provider', 'state']).register(registry)
    this.writeSeconds = new HistogramVec('modelgate_store_write_batch_seconds', 'Time to commit one batch of store writes', [], BATCH_SECONDS).register(registry)
    this.writeSizes = new HistogramVec('modelgate_store_write_batch_writes', 'Writes per committed batch', [], BATCH_WRITES).register(registry)
    this.toolCalls = new CounterVec('modelgate_mcp_tool_calls_total', 'MCP tool calls by server, tool and outcome', ['server', 'tool', 'status']).register(registry)
    this.clamped = new CounterVec('modelgate_usage_clamped_total', 'Calls whose provider reported a count past the ceiling of one call, billed as the ceiling', ['provider']).register(registry)
    this.fallbacks = new CounterVec('modelgate_model_fallbacks_total', 'Models that could not answer a call and moved it on, by the model (or alias) the call named, the model that answered it (none: no model did) and why', ['requested_model', 'answering_model', 'class']).register(registry)
    const books = this.healthBooks
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'modelgate_breaker_state',
      help: 'Providers\' circuit breakers: 1 for the state each is in (summed over workers: how many are in it)',
      labelNames: ['provider', 'state'],
      registers: [registry],
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
      registers: [registry],
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
      registers: [registry],
      aggregator: 'max',
      async collect () {
        this.reset()
        for (const store of stores) {
          for (const org of await store.orgs.list()) if (org.held_nano !== 0) this.set({ org: org.id }, Number(nanoToUsd(org.held_nano)))
        }
      }
    })
  }

  /** A call ended: its counts, tokens, durations, cost, and each of its attempts; `model` is the label of its model, `label` makes one of another catalog id. */
  call (o: CallOutcome, model: string, label: (id: string | null) => string = () => model): void {
    const provider = o.provider ?? ''
    const steps = o.fallbacks
    if (steps !== undefined && steps.length > 0) {
      const requested = label(o.requestedModel ?? o.model)
      const answering = o.status === 'ok' ? model : 'none'
      for (const s of steps) this.fallbacks.inc([requested, answering, s.why])
    }
    this.requests.inc([o.endpoint, model, provider, o.status, o.httpStatus])
    if (o.overheadMs !== null) this.overhead.observe([o.endpoint, o.stream ? 'true' : 'false'], o.overheadMs / 1000)
    for (let i = 0; i < o.attempts.length; i++) this.attempt(o.attempts[i] as AttemptReport)
    // a tool call's labels are the server's id and the name of one of its listed tools, never a client's string
    if (o.endpoint === 'mcp.tools_call' && o.model !== null && o.provider !== null) this.toolCalls.inc([o.provider, o.model.slice(o.provider.length + 1), o.status])
    if (o.clamped === true) this.clamped.inc([provider])
    if (!o.attempted) return
    const op = operationOf(o.endpoint)
    this.duration.observe([op, provider, model, o.endpoint, o.status], (o.endedAt - o.startedAt) / 1000)
    if (o.firstByteAt !== null) this.ttft.observe([op, provider, model, o.endpoint, o.stream ? 'true' : 'false'], (o.firstByteAt - o.startedAt) / 1000)
    if (!o.billed) return
    if (o.costNano > 0 && o.principal !== null) this.cost.inc([o.principal.org], o.costNano / 1e9)
    if (o.endpoint === 'mcp.tools_call') return
    const u = o.usage
    this.tokens.observe([op, provider, model, 'input'], u.prompt_tokens)
    if (u.cached_input_tokens > 0) this.tokens.observe([op, provider, model, 'cached_input'], u.cached_input_tokens)
    this.tokens.observe([op, provider, model, 'output'], u.completion_tokens)
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
}

const byRegistry = new WeakMap<Registry, CallMetrics>()

/** The series of a registry, made the first time (a reloaded configuration finds them again). */
export function callMetrics (registry: Registry): CallMetrics {
  let m = byRegistry.get(registry)
  if (m === undefined) {
    m = new CallMetrics(registry)
    byRegistry.set(registry, m)
  }
  return m
}
