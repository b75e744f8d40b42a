import type { FastifyReply, FastifyRequest } from 'fastify'
import type { CallEndContext, CallOutcome, CallProtocol, CallStatus, CallView, Endpoint, Gateway, PluginAnswer } from '../../plugins/api/index.js'
import { chargeOf, settle, ZERO_COST, ZERO_USAGE } from './billing.js'
import { addDroppedNames } from './dropped-names.js'
import { upstreamModelOn, type CatalogModel } from './catalog.js'
import type { FallbackClass } from '../../config/schema.js'
import type { FallbackStep } from './fallbacks.js'
import { runAll, type HookRegistry } from './hooks.js'
import { NO_TAGS } from './tags.js'
import type { Json, Protocol, Usage } from '../translation/types.js'
import type { AttemptReport } from '../upstream/index.js'
import { CallAbort, type AttemptSink } from '../upstream/types.js'

/** The longest client string a usage record keeps (a model name). */
export const MAX_CLIENT_STRING = 256

/** Where a stream in progress says how far it got, for a call that ends while it runs. */
export interface RelayProgress {
  usage: () => Usage | null
  relayedText: () => string
}

export interface CallEnd {
  status: CallStatus
  /** Usage the upstream reported (null: none). */
  usage?: Usage | null
  /** The upstream finished its answer (usage is final). */
  complete?: boolean
  /** The status of the answer about to be sent, when it is not sent yet. */
  httpStatus?: number
  /** The refusal's error code, when the call is refused. */
  error?: string
}

/**
 * One call on a metered route, from its admission to its outcome: the only owner of the call's
 * state. The pipeline changes it through the methods below, each named by what happened;
 * dispatch reports its attempts to it; plugins read it through CallView (`request.call`) and get
 * its outcome, once, in their onCallEnd hooks. It ends in one place (`end`), which settles what
 * the call is billed for and what it costs.
 */
export class Call implements CallView, AttemptSink {
  private _model: CatalogModel | null = null
  /** The model (or alias) the client named, when the call may be answered by another. */
  private _requested: CatalogModel | null = null
  private _candidates: readonly CatalogModel[] = []
  private readonly _fallbacks: FallbackStep[] = []
  /** The model as the client named it, when it is no catalog model (a pass-through call). */
  private modelName: string | null = null
  private _provider: string | null = null
  private _dropped: string[] = []
  private _tags: readonly string[] = NO_TAGS
  private _stream = false
  private _billable: boolean
  private _unmetered = false
  readonly startedAt: number
  /** performance.now() when the call began (high resolution: overhead and traces). */
  readonly t0 = performance.now()
  private firstByteAt: number | null = null
  private attempted = false
  /** The client body after admission (for estimates and stored content). */
  private requestBody: Json | null = null
  private responseContent: string | null = null
  private contentKept = false
  private progress: RelayProgress | null = null
  /** How the call failed, when it ends on an error answer (set before the error is thrown). */
  private failure: CallStatus | null = null
  private upstreamMs = 0
  private readonly attempts: AttemptReport[] = []
  private overheadMs: number | null = null
  /** A plugin answered the call at admission (a cache hit). */
  private _pluginAnswer: PluginAnswer | null = null
  private _fixedCost: number | null = null
  private ended: Promise<void> | undefined | null = null
  private outcome: CallOutcome | null = null
  /** Cancels the upstream call in flight when the client goes away. */
  readonly abort = new CallAbort()

  constructor (
    private readonly gateway: Gateway,
    private readonly hooks: HookRegistry,
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    private _endpoint: Endpoint,
    private _protocol: CallProtocol
  ) {
    this.startedAt = gateway.clock.now()
    this._billable = _endpoint !== 'count_tokens'
  }

  get endpoint (): Endpoint { return this._endpoint }
  get billable (): boolean { return this._billable }
  get unmetered (): boolean { return this._unmetered }
  get protocol (): CallProtocol { return this._protocol }
  /** The client's protocol, for the model call pipeline and its translators, which an MCP tool call never reaches. */
  get modelProtocol (): Protocol {
    if (this._protocol === 'mcp') throw new Error('an MCP tool call has no model protocol')
    return this._protocol
  }

  get model (): CatalogModel | null { return this._model }
  get requestedModel (): CatalogModel | null { return this._requested ?? this._model }
  get candidates (): readonly CatalogModel[] { return this._candidates.length === 0 && this._model !== null ? [this._model] : this._candidates }
  get fallbacks (): readonly FallbackStep[] { return this._fallbacks }
  get provider (): string | null { return this._provider }
  get dropped (): readonly string[] { return this._dropped }
  get tags (): readonly string[] { return this._tags }
  get stream (): boolean { return this._stream }
  get done (): boolean { return this.outcome !== null }
  get keepsContent (): boolean { return this.contentKept }
  get fixedCostNano (): number | null { return this._fixedCost }

  /** The model the call is for: a catalog model, or (pass-through) only the name the body gave. */
  resolved (model: CatalogModel | null, stream: boolean, name?: string): void {
    this._model = model
    this._stream = stream
    // a client's string, kept in the usage record: cut to a bounded length
    if (model === null) this.modelName = (name ?? '').slice(0, MAX_CLIENT_STRING)
  }

  /**
   * The model the client named (an alias, or a model with fallbacks) and every model that may
   * answer it, the first the one tried first (the holds cover the dearest); before admission.
   */
  chain (requested: CatalogModel, candidates: readonly CatalogModel[]): void {
    this._requested = requested
    this._candidates = candidates
  }

  /** The model tried could not answer, for `why`: the call goes on with `next`. */
  fellBack (why: FallbackClass, next: CatalogModel): void {
    const from = this._model
    if (from !== null) this._fallbacks.push({ model: from.id, why })
    this._model = next
  }

  /** The call costs nothing at the provider (a read, an upload, a count): no hold, no charge, no quota. */
  free (): void { this._billable = false }

  /** The call may spend at the provider without reporting what (a pass-through batch job): before admission. */
  spendsUnread (): void { this._unmetered = true }

  /** The call costs this much, whatever its tokens (an MCP tool call); before admission. */
  pricedPerCall (nano: number): void { this._fixedCost = nano }

  /** The protocol the client speaks, when its route alone does not say (a pass-through endpoint). */
  speaks (protocol: Protocol): void { this._protocol = protocol }

  /** The kind of call, when its route alone does not say (Gemini's methods share one path); before admission. */
  kind (endpoint: Endpoint): void {
    this._endpoint = endpoint
    this._billable = endpoint !== 'count_tokens'
  }

  /**
   * Client fields not sent on: unsupported by the model, or with no upstream equivalent. The
   * names may be any key a client chose: kept encoded as header tokens, bounded in number and length.
   */
  dropParams (names: readonly string[]): void {
    if (names.length > 0) addDroppedNames(this._dropped, names)
  }

  /** The tags the call carries (checked: engine/gateway/tags.ts). */
  tagged (tags: readonly string[]): void { this._tags = tags }

  /** The client body as it is after admission (the hooks may have changed it). */
  admittedBody (body: Json): void { this.requestBody = body }

  /** Keep the request and what the client receives for the outcome's `content`. */
  keepContent (): void { this.contentKept = true }

  /** A plugin answered the call at admission: nothing goes upstream. */
  answeredByPlugin (answer: PluginAnswer): void { this._pluginAnswer = answer }
  get pluginAnswer (): PluginAnswer | null { return this._pluginAnswer }

  /** The provider this call goes to, before any attempt (pass-through names it in its path). */
  routedTo (provider: string): void { this._provider = provider }

  attemptStarted (provider: string): void {
    this.attempted = true
    this._provider = provider
  }

  attemptEnded (report: AttemptReport): void {
    this.attempts.push(report)
    this.upstreamMs += report.end - report.start
  }

  /** Time spent waiting on a provider outside an attempt (a retry's pause, a body's transfer). */
  waited (ms: number): void { this.upstreamMs += ms }

  /** The call failed this way; the error about to be thrown is its answer. */
  failed (status: 'timeout' | 'upstream_error'): void { this.failure = status }

  /**
   * The answer's headers are about to go out: `{prefix}Overhead-Ms` is the time since the call
   * began less the time spent waiting on providers (for a stream, up to its first byte).
   */
  answering (): void {
    if (this.overheadMs !== null) return
    this.overheadMs = Math.max(0, performance.now() - this.t0 - this.upstreamMs)
    if (!this.reply.raw.headersSent) this.reply.header(this.gateway.headers.overhead, this.overheadMs.toFixed(2))
  }

  /** The first byte of the answer reached the client (or, for a whole answer, arrived). */
  firstByte (): void {
    if (this.firstByteAt === null) this.firstByteAt = this.gateway.clock.now()
  }

  /** A stream is being relayed: asked how far it got if the call ends under it. */
  relaying (progress: RelayProgress): void { this.progress = progress }

  /** What the client received, when content is kept. */
  answered (content: string | null): void {
    if (this.contentKept) this.responseContent = content
  }

  /** How an error answer ends the call, when nothing said otherwise. */
  private statusOnError (): CallStatus {
    return this.failure ?? (this.attempted ? 'upstream_error' : 'refused')
  }

  /**
   * Server tools billed per call and reported nowhere: Chat Completions' web search, when the
   * body that reached an OpenAI-protocol provider asked for it (a translator to another protocol drops it).
   */
  private perCallTools (): Record<string, number> | undefined {
    const body = this.requestBody
    if (body === null || typeof body !== 'object' || (body as Record<string, unknown>).web_search_options == null || this._provider === null) return undefined
    const provider = this.gateway.config.providers.find((p) => p.id === this._provider)
    return provider?.protocol === 'openai' ? { web_search: 1 } : undefined
  }

  /** Ends the call on the error answer about to be sent with `httpStatus` (and `error`, its code). */
  endOnError (httpStatus: number, error?: string): Promise<void> | undefined {
    return this.end({ status: this.statusOnError(), httpStatus, error })
  }

  /**
   * Ends the call: the outcome is built and the onCallEnd hooks run, once; a later call gets the
   * first one's promise. Returns undefined when no hook returned a promise.
   */
  end (how: CallEnd): Promise<void> | undefined {
    if (this.outcome !== null) return this.ended ?? undefined
    const now = this.gateway.clock.now()
    const progress = this.progress
    const reported = how.usage !== undefined ? how.usage : progress?.usage() ?? null
    const httpStatus = how.httpStatus ?? (this.reply.raw.headersSent ? this.reply.statusCode : statusOf(how.status, this.reply.statusCode))
    const billed = this.billable && this.attempted && this.firstByteAt !== null && httpStatus < 400
    const price = this._model?.price ?? null
    const hit = this._pluginAnswer?.cacheHit === true
    const s = this._pluginAnswer !== null
      ? { usage: { ...this._pluginAnswer.usage }, cost: 0, detail: ZERO_COST, estimated: false }
      : this._fixedCost !== null
        ? { usage: { ...ZERO_USAGE }, cost: billed ? this._fixedCost : 0, detail: { ...ZERO_COST, tool_call: billed ? this._fixedCost : 0 }, estimated: false }
        : settle({ billed, usage: reported, complete: how.complete === true, relayedText: progress?.relayedText() ?? '', requestBody: this.requestBody, perCallTools: this.perCallTools() }, price)
    if ('clamped' in s && s.clamped === true) this.request.log.warn({ reported, billed: s.usage }, 'the upstream reported usage past the ceilings of one call: billed at the ceilings')
    const outcome: CallOutcome = Object.freeze({
      traceId: this.request.id,
      endpoint: this._endpoint,
      protocol: this._protocol,
      model: this._model?.id ?? this.modelName,
      requestedModel: this._requested !== null && this._requested !== this._model ? this._requested.id : null,
      fallbacks: this._fallbacks,
      upstreamModel: this._model === null ? this.modelName : upstreamModelOn(this._model, this._provider),
      provider: this._provider,
      stream: this._stream,
      status: how.status,
      error: how.status === 'refused' ? how.error ?? String(httpStatus) : null,
      httpStatus,
      principal: this.request.principal,
      attempted: this.attempted,
      billed,
      usage: Object.freeze(s.usage),
      estimated: s.estimated,
      clamped: 'clamped' in s && s.clamped === true,
      costNano: s.cost,
      costDetail: Object.freeze(s.detail),
      cacheHit: hit,
      savedNano: hit ? chargeOf(s.usage, price) : 0,
      startedAt: this.startedAt,
      firstByteAt: this.firstByteAt,
      endedAt: now,
      t0: this.t0,
      t1: performance.now(),
      overheadMs: this.overheadMs,
      upstreamMs: this.upstreamMs,
      attempts: this.attempts,
      dropped: this._dropped,
      tags: this._tags,
      content: this.contentKept ? { request: JSON.stringify(this.requestBody), response: this.responseContent } : null
    })
    this.outcome = outcome
    const ctx: CallEndContext = { request: this.request, reply: this.reply }
    let ended: Promise<void> | undefined
    try {
      ended = runAll(this.hooks.onCallEnd, outcome, ctx) ?? undefined
    } catch (err) {
      ended = Promise.reject(err)
    }
    this.ended = ended
    return ended
  }

  /**
   * The response is over (sent, failed, or the client left) and the call was not ended on the
   * way: it ends now, as a client abort when the answer was not written whole.
   */
  closed (): void {
    if (this.outcome !== null) return
    const aborted = !this.reply.raw.writableEnded
    if (aborted) this.abort.abort()
    const ended = this.end({ status: aborted ? 'client_aborted' : this.statusOnError() })
    if (ended !== undefined) ended.catch((err: unknown) => { this.request.log.error({ err }, 'end-of-call work failed') })
  }
}

// The status an error answer will have when it is not sent yet.
function statusOf (status: CallStatus, current: number): number {
  if (status === 'ok') return 200
  if (status === 'client_aborted') return 499
  return current >= 400 ? current : status === 'timeout' ? 408 : 502
}
