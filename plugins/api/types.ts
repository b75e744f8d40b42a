import type { EventEmitter } from 'node:events'
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { Static, TObject } from '@sinclair/typebox'
import type { Registry } from 'prom-client'
import type { Config } from '../../config/schema.js'
import type { Clock } from '../../engine/kernel/clock.js'
import type { Catalog, CatalogModel } from '../../engine/gateway/catalog.js'
import type { ErrorFamily, GatewayError } from '../../engine/kernel/errors.js'
import type { CostDetail, KeyBudget, KeyLimits, Store } from '../../engine/store/types.js'
import type { Json, Protocol, UpstreamProtocol, Usage } from '../../engine/translation/types.js'
import type { AttemptReport, Upstreams } from '../../engine/upstream/index.js'

// The plugin API's types: what a plugin sees of the gateway, of a call and of its outcome.
//
// A plugin is a Fastify plugin (`async (fastify, options) => {}`) registered inside the /v1
// scope in config order. Besides Fastify's own hooks it gets the gateway's, through
// `fastify.gateway.addHook(name, fn)`:
//
//   onAdmission        the key is known, the model resolved and the client body validated: a
//                      hook may change the body, or refuse the call by throwing a gateway error
//   onUpstreamRequest  before each upstream attempt (failover tries the next provider): the
//                      provider and the upstream body, which a hook may change
//   onResponseBody     a whole (non-streamed) answer in the client's protocol, before it is sent
//   onStreamEvent      each event of a streamed answer in the client's protocol: a hook may
//                      change it, drop it (return null) or replace it with several
//   onStreamEnd        the stream's last chance to add events (text a hook held back)
//   onCallEnd          the call's outcome, once and for every call of a metered route (refused
//                      ones included): the one record of what happened and what it costs
//
// Hooks of one kind run in config order. onCallEnd hooks all start in config order and the
// gateway waits for every one: for an answer that completes, before its last byte is sent, so
// that what they write (the usage record, the charge, the quota count) is stored by the time the
// client has its answer.

export type { Json, Protocol, Usage } from '../../engine/translation/types.js'

/** What a call's client speaks: a model API's protocol, or 'mcp' for an MCP tool call (`/mcp`). */
export type CallProtocol = Protocol | 'mcp'
export type { CatalogModel, Price } from '../../engine/gateway/catalog.js'
export type * from '../../engine/store/types.js'
export type { AttemptOutcome, AttemptReport } from '../../engine/upstream/index.js'

export type { Clock } from '../../engine/kernel/clock.js'

export interface HeaderNames { trace: string, model: string, provider: string, droppedParams: string, fallback: string, overhead: string, tags: string }

/** Who is calling: set by the auth plugin on `request.principal`. */
export interface Principal {
  keyId: string
  org: string
  project: string
  models: string[]
  /** Provider ids whose pass-through routes this key may use. */
  passthrough: string[]
  /** Globs over "{server}/{tool}": the MCP tools this key may list and call; absent or empty: none. */
  mcp?: string[]
  /** When the key stops working (ms); null or absent: never. */
  expiresAt?: number | null
  /** The key's own calls (rpm) and billed tokens (tpm) per minute. */
  limits?: KeyLimits | null
  /** The key's own spending limit per UTC window. */
  budget?: KeyBudget | null
  /** The id the key's limits and budget count under (the first key of its rotation line); its own id when absent. */
  lineage?: string
}

/**
 * The kind of call: its usage record's `endpoint` (`generate_content`: Google's Gemini API;
 * `embeddings` and `images.generations` whichever API the client speaks; `mcp.tools_call`: a tool
 * called through /mcp). A `count_tokens` call is free and has no usage record.
 */
export type Endpoint = 'chat.completions' | 'messages' | 'responses' | 'generate_content' | 'embeddings' | 'images.generations' | 'passthrough' | 'count_tokens' | 'mcp.tools_call'

/**
 * How a call ended. `refused`: it never reached an upstream (a bad request, an unknown model, a
 * limit, a plugin's refusal); recorded with its error's code when the caller's key is known.
 */
export type CallStatus = 'ok' | 'client_aborted' | 'upstream_error' | 'timeout' | 'refused'

/** What plugins may read of a call in progress, on `request.call` (metered routes only). */
export interface CallView {
  readonly endpoint: Endpoint
  /** The client's protocol. */
  readonly protocol: CallProtocol
  /** The call can cost money: false for a free one (count_tokens, a pass-through read or upload), which balance and quota leave alone. */
  readonly billable: boolean
  /**
   * The call may spend at the provider but its answer reports nothing the gateway can read (a
   * pass-through batch or fine-tuning job, audio...): a plugin that holds money or counts spend
   * refuses it (UnmeteredEndpoint) rather than let it past a balance, a budget or a quota.
   */
  readonly unmetered: boolean
  readonly stream: boolean
  /** The catalog model, once resolved: the one being tried, or that answered (an alias's target, a fallback). */
  readonly model: CatalogModel | null
  /** The model or alias the client named (the model itself when no other may answer). */
  readonly requestedModel: CatalogModel | null
  /** Every model that may answer the call (an alias's targets, fallbacks the key may use), the first tried first: what a hold covers. */
  readonly candidates: readonly CatalogModel[]
  /** The models tried that could not answer, and why, in order. */
  readonly fallbacks: ReadonlyArray<{ readonly model: string, readonly why: string }>
  /** The provider answering (or last tried). */
  readonly provider: string | null
  /** Client fields dropped before forwarding (unsupported by the model, or with no upstream equivalent). */
  readonly dropped: readonly string[]
  /** The tags the call carries (`{prefix}Tags`, `metadata.tags`), once admitted; never a metric label. */
  readonly tags: readonly string[]
  readonly startedAt: number
  /**
   * What the call costs when it is priced per call rather than by tokens (an MCP tool call: its
   * server's `pricing.per_call`), in nano-dollars; null for a call priced by its model's tokens.
   * The balance holds it at admission; the call is charged it when billed.
   */
  readonly fixedCostNano: number | null
}

/** The one immutable record of a call, produced once by the gateway and handed to onCallEnd hooks. */
export interface CallOutcome {
  readonly traceId: string
  readonly endpoint: Endpoint
  readonly protocol: CallProtocol
  /** The catalog model id; null when the call was refused before a model was resolved. */
  readonly model: string | null
  /** The model name sent to the provider. */
  readonly upstreamModel: string | null
  /** The model or alias the client named, when another model answered (or was last tried); null otherwise. */
  readonly requestedModel?: string | null
  /** The models tried that could not answer, and why (rate_limited, unavailable, timeout, context_length, content_filtered), in order; none when the first answered. */
  readonly fallbacks?: ReadonlyArray<{ readonly model: string, readonly why: string }>
  readonly provider: string | null
  readonly stream: boolean
  readonly status: CallStatus
  /** A refused call's error code (`quota_exceeded`, `model_not_found`, a plugin's own code...); null otherwise. */
  readonly error: string | null
  /** The HTTP status the client got (200 for a stream that failed after it started). */
  readonly httpStatus: number
  readonly principal: Principal | null
  /** An upstream was tried: the call is metered (has a usage record). */
  readonly attempted: boolean
  /** The client got (part of) an answer and the call is charged. */
  readonly billed: boolean
  /** What the call is billed for (all zero when it is not billed). */
  readonly usage: Readonly<Usage>
  /** True when some counts were estimated because the upstream never reported them. */
  readonly estimated: boolean
  /** True when the upstream reported a count past the ceiling of one call (100M tokens, 10k images or tool uses), billed as the ceiling. */
  readonly clamped?: boolean
  readonly costNano: number
  /** The cost by part (nano-dollars, summing to costNano) and the tier it billed at. */
  readonly costDetail: Readonly<CostDetail>
  /** A plugin answered the call from a cache: no provider was asked, it costs nothing, and `usage` holds the tokens it stands for. */
  readonly cacheHit: boolean
  /** What a cache hit would have cost at the model's current prices (nano-dollars); 0 otherwise. */
  readonly savedNano: number
  /** The gateway clock's time when the call began, its answer's first byte, and its end (ms). */
  readonly startedAt: number
  readonly firstByteAt: number | null
  readonly endedAt: number
  /** performance.now() of this process when the call began and ended (high resolution, for spans). */
  readonly t0: number
  readonly t1: number
  /** The gateway's own time in ms, providers' time excluded, up to the answer's headers; null when none was sent. */
  readonly overheadMs: number | null
  /** Time spent waiting on providers, ms (attempts, pauses before retries, a whole answer's transfer). */
  readonly upstreamMs: number
  /** Every attempt at a provider, in order, with its timings (performance.now()) and how it went. */
  readonly attempts: readonly AttemptReport[]
  readonly dropped: readonly string[]
  /** The call's tags (none: empty). */
  readonly tags: readonly string[]
  /** The client's request and what it received (JSON body, or the stream's bytes), when a plugin asked for them. */
  readonly content: { readonly request: string, readonly response: string | null } | null
}

interface HookContextBase {
  readonly request: FastifyRequest
  readonly reply: FastifyReply
  readonly call: CallView
}

export interface AdmissionContext extends HookContextBase {
  readonly principal: Principal | null
  /**
   * The catalog model called. Null on a pass-through call whose body names no catalog model of
   * that provider (or names none at all): it is metered, at no price; and on an MCP tool call
   * (`call.provider` is its server, `call.fixedCostNano` its price).
   */
  readonly model: CatalogModel | null
  /**
   * The validated client body: change it in place or assign another one. On an MCP tool call,
   * `{name, arguments}`: the tool's name at its server and the arguments it is called with.
   */
  body: Json
  /** Asks the gateway to keep the request and what the client received for `outcome.content`. */
  keepContent: () => void
  /**
   * Answers the call here, with no provider (a cache that has the answer): the admission hooks
   * after this one do not run, nothing goes upstream, and the answer is sent in the client's
   * protocol, as a stream when the client asked for one. Present on the model call routes
   * (chat, Messages, Responses, Gemini's generateContent); undefined where a call cannot be
   * answered so (count_tokens and Gemini's countTokens, pass-through).
   */
  answer?: (answer: PluginAnswer) => void
}

/** A call's answer given by a plugin at admission. */
export interface PluginAnswer {
  /**
   * The whole answer in the client's protocol: a chat completion, a Messages message, a
   * Responses object, a GenerateContentResponse.
   */
  body: Json
  /** The tokens the answer stands for: recorded with the call, which costs nothing. */
  usage: Usage
  /** The answer is a cache's: the outcome says so, with what the call would have cost (`savedNano`). */
  cacheHit?: boolean
  /** Headers to send with it. */
  headers?: Record<string, string>
}

export interface UpstreamRequestContext extends HookContextBase {
  readonly model: CatalogModel
  /** The provider's protocol: the body's shape (`converse` for AWS Bedrock's Converse API, which no client speaks). */
  readonly provider: { readonly id: string, readonly protocol: UpstreamProtocol }
  /** 1 for the first provider tried, 2 for the next after a failover... */
  readonly attempt: number
  /** The body about to be sent upstream: change it in place or assign another one. */
  body: Json
}

export interface ResponseBodyContext extends HookContextBase {
  /** The answer in the client's protocol: change it in place or assign another one. */
  body: Json
}

/** One event of a streamed answer, in the client's protocol: the SSE event name and its JSON data. */
export interface ClientEvent {
  event?: string
  data: Json
}

export type StreamEventResult = ClientEvent | ClientEvent[] | null | undefined

export interface StreamContext extends HookContextBase {
  readonly protocol: Protocol
}

export interface CallEndContext {
  readonly request: FastifyRequest
  readonly reply: FastifyReply
}

export interface HookSignatures {
  onAdmission: (ctx: AdmissionContext) => unknown
  onUpstreamRequest: (ctx: UpstreamRequestContext) => unknown
  onResponseBody: (ctx: ResponseBodyContext) => unknown
  /** Return undefined to keep the event, null to drop it, or the events to send in its place. */
  onStreamEvent: (ctx: StreamContext, event: ClientEvent) => StreamEventResult
  /** Events to send before the stream's end (after the upstream's last event). */
  onStreamEnd: (ctx: StreamContext) => ClientEvent[] | undefined
  onCallEnd: (outcome: CallOutcome, ctx: CallEndContext) => unknown
}

export type GatewayHookName = keyof HookSignatures
export type HookFn<N extends GatewayHookName> = HookSignatures[N]

export interface GatewayHooks {
  add: <N extends GatewayHookName>(name: N, fn: HookFn<N>) => void
}

/** An error a plugin refuses a call with, answered in the route family's shape. */
export interface RefusalSpec {
  status: number
  /** error.code in the numeric-code shape (default: the status); also sent on the Messages shape as error.code. */
  code?: string | number
  message: string
  /** error.type in the numeric-code shape (default by status). */
  type?: string
  headers?: Record<string, string>
  /** false: `x-should-retry: false`, so the official SDKs do not retry. */
  retry?: boolean
}

/** The app's services, on `fastify.gateway`. */
export interface Gateway {
  readonly config: Readonly<Config>
  readonly store: Store
  readonly catalog: Catalog
  readonly upstreams: Upstreams
  readonly clock: Clock
  readonly headers: HeaderNames
  readonly log: FastifyBaseLogger
  /** Adds a gateway hook (see the top of this file). */
  addHook: GatewayHooks['add']
  /** A gateway error to throw from a hook or handler: rendered in the route family's shape. */
  refusal: (spec: RefusalSpec) => GatewayError
  /** 'reload' and the like; free for plugins to listen to. */
  readonly events: EventEmitter
  /**
   * The process's Prometheus registry (prom-client), served on GET /metrics (summed over the
   * workers) when metrics are on. It outlives a reloaded configuration: a plugin registers a
   * series once (`registry.getSingleMetric(name) ?? new Counter({..., registers: [registry]})`).
   */
  readonly metrics: Registry
}

/** The error shape of the route a request matched. */
export type { ErrorFamily }

/**
 * A concern plugin: a name, a JSON Schema of its options (a TypeBox schema is one), the plugins it
 * needs before it in the chain, and the Fastify plugin. Options reach the plugin validated, with
 * the schema's defaults filled in.
 */
export interface GatewayPlugin<S extends TObject = TObject> {
  name: string
  /** One line for listings (`modelgate plugins`). */
  description?: string
  options?: S
  /**
   * Checks the schema cannot express (a regular expression that must compile...): returns the
   * problems, each as `<path below options>: <what>`; reported with the config's other problems.
   */
  validate?: (options: Static<S>) => string[]
  dependencies?: string[]
  /**
   * 'api' (default): registered in the /v1 scope, in config order. 'app': registered on the
   * whole app (every route, /admin and /console included), before the /v1 chain; for a concern
   * that must cover everything, such as the IP rate limit.
   */
  scope?: 'api' | 'app'
  plugin: FastifyPluginAsync<Static<S>>
}

/**
 * A plugin of any options schema, as the plugin host takes one (`modelgate/testing`'s `use`, a
 * chain): every `GatewayPlugin<S>` is one. Its options reach `validate` and `plugin` only after
 * the host checked them against the plugin's own schema, which is what makes them `Static<S>`.
 */
export type AnyGatewayPlugin = Omit<GatewayPlugin, 'validate' | 'plugin'> & {
  validate?: (options: never) => string[]
  plugin: FastifyPluginAsync<never>
}

declare module 'fastify' {
  interface FastifyInstance {
    gateway: Gateway
  }
  interface FastifyRequest {
    /** Set by the auth plugin. */
    principal: Principal | null
    /** The call in progress, on metered routes. */
    call: CallView | null
    /**
     * The matched route's config (request.routeOptions.config), read once per request: Fastify
     * builds a new routeOptions object on every read of it.
     */
    routeConfig: FastifyContextConfig
  }
  interface FastifyContextConfig {
    /** Error shape of the route family (default 'openai', the numeric-code shape). */
    family?: ErrorFamily
    /**
     * The route also takes the key from a header of its own: true for `x-api-key` (the Messages
     * routes), or the header's name (`x-goog-api-key` on the Gemini routes).
     */
    apiKeyHeader?: boolean | string
    /** The route also takes the key from this query parameter (`key` on the Gemini routes). */
    apiKeyQuery?: string
    /** The route needs no API key (health, console assets). */
    auth?: boolean
    /** The route is a metered call: it has an outcome, and the admission policies apply. */
    metered?: boolean
    /**
     * The route starts calls of its own within some requests (/mcp: each tools/call), through the
     * same gate as a metered route's: it may spend.
     */
    spends?: boolean
  }
}
