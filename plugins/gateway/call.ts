import type { FastifyReply, FastifyRequest } from 'fastify'
import type { CallEndContext, CallOutcome, CallStatus, CallView, Endpoint, Gateway } from '../api/index.js'
import { settle } from './billing.js'
import type { CatalogModel } from './catalog.js'
import { runAll, type HookRegistry } from './hooks.js'
import type { Json, Protocol, Usage } from '../translation/types.js'
import type { AttemptReport } from '../upstream/index.js'
import type { CallAbort } from '../upstream/types.js'

/** Where a stream in progress says how far it got, for a call that ends while it runs. */
export interface RelayProgress {
  usage: () => Usage | null
  relayedText: () => string
}

export interface CallEnd {
  status: Exclude<CallStatus, 'client_aborted'> | 'client_aborted'
  /** Usage the upstream reported (null: none). */
  usage?: Usage | null
  /** The upstream finished its answer (usage is final). */
  complete?: boolean
  /** The status of the answer about to be sent, when it is not sent yet. */
  httpStatus?: number
}

/**
 * The gateway's record of one call on a metered route, kept by the call pipeline alone: plugins
 * read it through CallView (`request.call`) and get its outcome, once, in their onCallEnd hooks.
 * The outcome is settled here, in one place: what the call is billed for and what it costs.
 */
export class CallRecord implements CallView {
  model: CatalogModel | null = null
  /** The model as the client named it, recorded when it is no catalog model (pass-through calls). */
  modelName: string | null = null
  provider: string | null = null
  dropped: string[] = []
  stream = false
  protocol: Protocol
  readonly startedAt: number
  firstByteAt: number | null = null
  /** An upstream was tried. */
  attempted = false
  /** The client body after admission (for estimates and stored content). */
  requestBody: Json | null = null
  /** What the client received, when content is kept; set by the relay or the JSON answer. */
  responseContent: string | null = null
  keepContent = false
  /** The upstream call in flight, cancelled when the client goes away. */
  abort: CallAbort | null = null
  /** The stream being relayed, asked how far it got when the call ends under it. */
  progress: RelayProgress | null = null
  /** The status to record if the call ends on an error answer (set before the error is thrown). */
  failure: CallStatus | null = null
  /** performance.now() when the call began (high resolution, for the overhead and traces). */
  readonly t0 = performance.now()
  /** Time spent waiting on providers, ms: attempts, pauses before a retry, reading a whole answer. */
  upstreamMs = 0
  /** Every attempt at a provider, in order. */
  readonly attempts: AttemptReport[] = []
  /** The gateway's own time up to its answer's headers (ms), once they are set. */
  overheadMs: number | null = null
  private ended: Promise<void> | undefined | null = null
  private outcome: CallOutcome | null = null

  constructor (
    private readonly gateway: Gateway,
    private readonly hooks: HookRegistry,
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    readonly endpoint: Endpoint,
    protocol: Protocol
  ) {
    this.protocol = protocol
    this.startedAt = gateway.clock.now()
  }

  get done (): boolean { return this.outcome !== null }

  /** An attempt at a provider ended. */
  attemptEnded (r: AttemptReport): void {
    this.attempts.push(r)
    this.upstreamMs += r.end - r.start
  }

  /** Time spent waiting on a provider outside an attempt (a retry's pause, a body's transfer). */
  waited (ms: number): void { this.upstreamMs += ms }

  /**
   * The answer's headers are about to go out: `{prefix}Overhead-Ms` is the time since the call
   * began less the time spent waiting on providers (for a stream, up to its first byte).
   */
  answering (): void {
    if (this.overheadMs !== null) return
    this.overheadMs = Math.max(0, performance.now() - this.t0 - this.upstreamMs)
    if (!this.reply.raw.headersSent) this.reply.header(this.gateway.headers.overhead, this.overheadMs.toFixed(2))
  }

  /** The first byte of the answer reached the client (or, for a whole JSON answer, arrived). */
  firstByte (): void {
    if (this.firstByteAt === null) this.firstByteAt = this.gateway.clock.now()
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
    const billed = this.attempted && this.firstByteAt !== null && httpStatus < 400
    const price = this.model?.price ?? null
    const s = settle({
      billed,
      usage: reported,
      complete: how.complete === true,
      relayedText: progress?.relayedText() ?? '',
      requestBody: this.requestBody
    }, price)
    const outcome: CallOutcome = Object.freeze({
      traceId: this.request.id,
      endpoint: this.endpoint,
      protocol: this.protocol,
      model: this.model?.id ?? this.modelName,
      provider: this.provider,
      stream: this.stream,
      status: how.status,
      httpStatus,
      principal: this.request.principal,
      attempted: this.attempted,
      billed,
      usage: Object.freeze(s.usage),
      estimated: s.estimated,
      costNano: s.cost,
      startedAt: this.startedAt,
      firstByteAt: this.firstByteAt,
      endedAt: now,
      overheadMs: this.overheadMs,
      upstreamMs: this.upstreamMs,
      dropped: Object.freeze([...this.dropped]),
      content: this.keepContent ? Object.freeze({ request: JSON.stringify(this.requestBody), response: this.responseContent }) : null
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
    if (aborted) this.abort?.abort()
    const status: CallStatus = aborted ? 'client_aborted' : this.failure ?? (this.attempted ? 'upstream_error' : 'refused')
    const ended = this.end({ status })
    if (ended !== undefined) ended.catch((err: unknown) => { this.request.log.error({ err }, 'end-of-call work failed') })
  }
}

// The status an error answer will have when it is not sent yet.
function statusOf (status: CallStatus, current: number): number {
  if (status === 'ok') return 200
  if (status === 'client_aborted') return 499
  return current >= 400 ? current : status === 'timeout' ? 408 : 502
}
