import type { EventEmitter } from 'node:events'
import type { FastifyReply } from 'fastify'
import type { Config } from '../config/schema.js'
import type { Catalog } from './catalog.js'
import type { Store } from './store/index.js'
import type { Upstreams } from './upstream/index.js'
import type { DeferredWriter } from './store/deferred.js'
import type { Usage } from './translation/types.js'
import type { ErrorFamily } from './errors.js'
import type { Settlement } from './billing.js'

/** Time source; tests pass a fake one so windows and expiries need no sleeping. */
export interface Clock { now: () => number }
export const systemClock: Clock = { now: () => Date.now() }

export interface HeaderNames { trace: string, model: string, provider: string, droppedParams: string }

/** Who is calling: set by the auth plugin. */
export interface Principal {
  keyId: string
  org: string
  project: string
  models: string[]
}

/** What the route handler learned about the call, for metering, diagnostics and the ledger. */
export interface CallInfo {
  endpoint: 'chat.completions' | 'messages'
  model: string
  provider: string | null
  stream: boolean
  dropped: string[]
  startedAt: number
  firstByteAt: number | null
  usage: Usage | null
  status: 'ok' | 'client_aborted' | 'upstream_error' | 'timeout' | null
  /** Output text relayed on a stream, kept only to estimate tokens when usage never came. */
  relayedText?: string
  requestBody?: unknown
  responseText?: string
  /** Set once by billing.settle(): the usage and cost the call is billed for. */
  settled?: Settlement
}

/** The app's services, decorated on the root instance as `fastify.gw`. */
export interface Gateway {
  config: Config
  store: Store
  catalog: Catalog
  upstreams: Upstreams
  clock: Clock
  headers: HeaderNames
  /** 'key-revoked' (keyId): caches that hold keys drop them. */
  events: EventEmitter
  /** Post-response writes, committed in batches (plugins/store/deferred.ts); readers flush() first. */
  writer: DeferredWriter
}

declare module 'fastify' {
  interface FastifyInstance {
    gw: Gateway
  }
  interface FastifyRequest {
    principal: Principal | null
    call: CallInfo | null
  }
  interface FastifyReply {
    /** Callbacks of afterResponse, once the first is registered (decorated null in app.ts). */
    afterResponseFns: Array<() => void> | null
  }
  interface FastifyContextConfig {
    /** Error shape of the route family (default 'openai', the numeric-code shape). */
    family?: ErrorFamily
    /** The route accepts `x-api-key` as well as `Authorization: Bearer` (the Messages routes). */
    apiKeyHeader?: boolean
    /** The route needs no API key (health, console assets). */
    auth?: boolean
    /** The route is a metered call that admission policies (idempotency, quota, balance) apply to. */
    metered?: boolean
  }
}

/**
 * Runs fn once the response is over: sent in full, failed, or abandoned by the client. Fastify's
 * onResponse does not run when the client goes away, and billing must not miss those calls. The
 * callbacks run in the order they were added, in a microtask, so that every 'close' listener,
 * the route handler's own (registered later), has run first.
 */
export function afterResponse (reply: FastifyReply, fn: () => void): void {
  if (reply.afterResponseFns === null) {
    // one listener per response for every plugin's callbacks (Node warns past ten listeners)
    const fns: Array<() => void> = []
    reply.afterResponseFns = fns
    reply.raw.once('close', () => queueMicrotask(() => {
      for (const f of fns) {
        try {
          f()
        } catch (err) {
          reply.log.error({ err }, 'end-of-response work failed')
        }
      }
    }))
  }
  reply.afterResponseFns.push(fn)
}

/** The client went away before the whole response was written. */
export const clientAborted = (reply: FastifyReply): boolean => !reply.raw.writableEnded
