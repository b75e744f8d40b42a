import { randomUUID } from 'node:crypto'
import type { EventEmitter } from 'node:events'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
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
  endpoint: 'chat.completions' | 'messages' | 'responses'
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

// traceId()'s time part, made once per millisecond
let prefixMs = -1
let prefix = ''

/**
 * A request's trace id: a UUID in the version 7 layout, 48 bits of Unix milliseconds then random
 * bits (taken from randomUUID's pooled entropy). Unique like any random UUID, and ordered by
 * time, so the usage table's primary key, which is made from it, grows at its end: with random
 * ids every record dirtied a page of its own in the index, and a batch of usage writes cost
 * half as much again (measured on 100k records).
 */
export function traceId (now = Date.now()): string {
  if (now !== prefixMs) {
    const ms = now.toString(16).padStart(12, '0')
    prefixMs = now
    prefix = `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7`
  }
  return prefix + randomUUID().slice(15) // randomUUID(): xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx
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
    /**
     * The matched route's config (request.routeOptions.config), set once in app.ts's first
     * onRequest hook: Fastify builds a new routeOptions object on every read of it.
     */
    routeConfig: FastifyContextConfig
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

/**
 * A hook whose work is synchronous, as a callback-style Fastify hook (onRequest, preHandler): an
 * async hook costs a promise and a microtask per request for nothing. What `fn` throws goes to
 * the error handler, as from an async hook.
 */
export function syncHook (fn: (request: FastifyRequest, reply: FastifyReply) => void) {
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    try {
      fn(request, reply)
    } catch (err) {
      done(err as Error)
      return
    }
    done()
  }
}
