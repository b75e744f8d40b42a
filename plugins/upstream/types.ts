import type { Readable } from 'node:stream'
import type { Protocol } from '../translation/types.js'

export interface UpstreamRequest {
  /** Path below the provider's base_url: '/chat/completions' (openai) or '/v1/messages' (messages). */
  path: string
  /** Extra headers from the client to forward (anthropic-version, anthropic-beta); credentials are the provider's own. */
  headers: Record<string, string>
  /** The JSON body, serialized once. */
  body: string
  signal: AbortSignal
}

export interface UpstreamResponse {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: Readable
}

/** One configured provider: an HTTP pool, or the built-in demo answered in-process. */
export interface UpstreamClient {
  readonly id: string
  readonly protocol: Protocol
  request: (req: UpstreamRequest) => Promise<UpstreamResponse>
  close: () => Promise<void>
}
