import { EventEmitter } from 'node:events'
import type { Readable } from 'node:stream'
import type { Protocol } from '../translation/types.js'

export interface UpstreamRequest {
  /** Path below the provider's base_url: '/chat/completions', '/v1/messages' or '/responses'. */
  path: string
  /** Extra headers from the client to forward (anthropic-version, anthropic-beta); credentials are the provider's own. */
  headers: Record<string, string>
  /** The JSON body, serialized once. */
  body: string
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
  /** 'openai' or 'messages'. */
  readonly protocol: Protocol
  /** The provider serves the Responses API itself (Responses calls go through unchanged). */
  readonly responses: boolean
  request: (req: UpstreamRequest) => Promise<UpstreamResponse>
  close: () => Promise<void>
}
