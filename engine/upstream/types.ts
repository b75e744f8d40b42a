import { EventEmitter } from 'node:events'
import type { Readable } from 'node:stream'
import type { UpstreamProtocol } from '../translation/types.js'
import type { Platform } from './platforms/types.js'

export interface UpstreamRequest {
  /** Default POST. */
  method?: string
  /** Path below the provider's base_url ('/chat/completions', '/v1/messages'...), with its query string if any. */
  path: string
  /**
   * A model call: extra client headers to forward (anthropic-version, anthropic-beta), sent with a
   * JSON content type and the provider's credentials. With `forwarded` (pass-through): the
   * client's own headers, already cleaned of its credentials, sent as they are with the
   * provider's credentials added.
   */
  headers: Record<string, string | string[]>
  forwarded?: boolean
  /** The JSON body serialized once, or a stream sent as it comes (a pass-through upload). */
  body?: string | Readable
  signal: CallAbort
}

/**
 * Cancels one upstream call when its client goes away. undici takes an EventEmitter with an
 * `aborted` flag as a request's signal; this is that, at a fraction of what an AbortController
 * and its AbortSignal cost to create and listen to on every call. Emits 'abort' once.
 */
export class CallAbort extends EventEmitter {
  aborted = false

  abort (): void {
    if (this.aborted) return
    this.aborted = true
    this.emit('abort')
  }
}

export interface UpstreamResponse {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: Readable
}

/** One configured provider: an HTTP pool, or the built-in demo answered in-process. */
export interface UpstreamClient {
  readonly id: string
  /** 'openai', 'messages', 'gemini' or 'converse' (AWS Bedrock's). */
  readonly protocol: UpstreamProtocol
  /** The provider serves the Responses API itself (Responses calls go through unchanged). */
  readonly responses: boolean
  /** Its credentials (key, configured header values): masked in whatever of its answers goes on to a client or the log. */
  readonly secrets: readonly string[]
  /** Where the provider's models are served and how it is reached: the vendor's API, or a cloud platform. */
  readonly platform: Platform
  request: (req: UpstreamRequest) => Promise<UpstreamResponse>
  close: () => Promise<void>
}

/**
 * How one attempt at a provider went. `request_error`: the request could not be sent as it is (a
 * header or body the client sent that cannot be forwarded), which says nothing of the provider.
 */
export type AttemptOutcome = 'ok' | 'client_error' | 'server_error' | 'network_error' | 'timeout' | 'aborted' | 'request_error'

/** One attempt, as dispatch reports it (for the breaker, the latency average, metrics and traces). */
export interface AttemptReport {
  provider: string
  /** The catalog model the call is for, when it is a model call. */
  model: string | null
  /** The model's name at this provider (its provider entry's), when it is a model call. */
  upstreamModel?: string | null
  outcome: AttemptOutcome
  /** The HTTP status, when the provider answered. */
  status: number | null
  /** performance.now() at the start of the attempt and when it ended (headers, or the failure). */
  start: number
  end: number
  /** 1 for the call's first attempt, and on. */
  n: number
  /** A repeat on the same provider after a failure that was safe to repeat. */
  retry: boolean
  /** The first attempt on another provider after a failure. */
  failover: boolean
  error?: unknown
}

/** What a call learns of its attempts: dispatch reports each one to it, and it can cancel them. */
export interface AttemptSink {
  /** Cancels the attempt in flight (the client went away). */
  readonly abort: CallAbort
  /** An attempt at `provider` starts. */
  attemptStarted: (provider: string) => void
  attemptEnded: (report: AttemptReport) => void
  /** A pause before a retry, in ms: time spent on providers outside an attempt. */
  waited: (ms: number) => void
}
