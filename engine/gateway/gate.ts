import type { AdmissionContext, Gateway, Principal } from '../../plugins/api/index.js'
import { reachableProviders, type BodyObjects } from './body-objects.js'
import type { CatalogModel, ModelKind } from './catalog.js'
import { McpToolNotFound, ModelNotFound, NoOrgContext, NotChatModel, NotEmbeddingModel, NotImageModel, PassthroughForbidden, ServerToolUnpriced, type GatewayError } from '../kernel/errors.js'
import { DEFAULT_SERVER_TOOL_USES, serverTools, unpricedServerTools } from './holds.js'
import { runSeriesUntil } from './hooks.js'
import { callTags } from './tags.js'
import type { Pipe } from './pipeline.js'
import { then, type MaybePromise } from '../kernel/maybe-promise.js'
import type { Json } from '../translation/types.js'

// The one gate every route that spends passes: chat, Messages, Responses, Gemini, count_tokens,
// embeddings, images, pass-through, MCP tool calls (and whatever route comes next). A key is a promise to the operator: it reaches
// what it was granted, stops when it is revoked, and everything it spends is charged.
//
//   who          the auth plugin (onRequest): the key, its expiry, revocation, and its tenant
//                still there; `request.principal`
//   what         here: the catalog model the call names, among those the key's `models` globs
//                grant, of the kind the route serves; the provider a pass-through call reaches,
//                among those its `passthrough` list names; the MCP tool a tools/call names,
//                among those its `mcp` globs grant; the providers that hold the objects a /v1
//                call's body names, made by the key's organization (body-objects.ts)
//   how much     here, through the admission hooks of the chain (`admit`): rpm, tpm, budget and
//                quota (quota plugin), the balance's hold (balance plugin), idempotency,
//                guardrails, the cache
//
// A route calls these and nothing else to admit a call, so that no route admits what another
// would refuse for the same key and model. Where a route cannot know what a call costs, it says
// so (`Call.spendsUnread`) and the plugins that hold money refuse it (`unmeteredRefusal` of the
// plugin API) rather than guess.

/** Why a model of another kind is refused by a route of this one: a chat model names where it is served. */
function notOfKind (model: CatalogModel, wanted: ModelKind): GatewayError {
  if (wanted === 'embeddings') return new NotEmbeddingModel({ model: model.id })
  if (wanted === 'image') return new NotImageModel({ model: model.id })
  return new NotChatModel({ model: model.id, route: model.kind === 'embeddings' ? 'POST /v1/embeddings' : 'POST /v1/images/generations' })
}

/** The key's model globs; null when no key is asked for (the operator runs the gateway without auth). */
export const globsOf = (principal: Principal | null): readonly string[] | null => principal?.models ?? null

/**
 * The active catalog model `id` names, if the caller's key may use it: else 404 (unknown,
 * deprecated or offline, or not granted: the key cannot tell them apart), or 400 when it is a
 * model of another kind than the route serves (`kind`; none for a route that only shows models).
 */
export function grantedModel (gateway: Gateway, principal: Principal | null, id: string, kind?: ModelKind): CatalogModel {
  const model = gateway.catalog.find(id, globsOf(principal))
  if (model === undefined) throw new ModelNotFound({ model: id })
  if (kind !== undefined && model.kind !== kind) throw notOfKind(model, kind)
  return model
}

/**
 * A model as the listings show it (`GET /v1/models/{id}`, Gemini's): granted to the key, and
 * listed (some provider of it can be called); else 404.
 */
export function shownModel (gateway: Gateway, principal: Principal | null, id: string): CatalogModel {
  const model = gateway.catalog.shown(id, globsOf(principal))
  if (model === undefined) throw new ModelNotFound({ model: id })
  return model
}

/** The listed catalog models the caller's key may see (listings). */
export function grantedModels (gateway: Gateway, principal: Principal | null): CatalogModel[] {
  return gateway.catalog.visible(globsOf(principal))
}

/** A pass-through call's key: there must be one (pass-through spends the provider's own key), granted this provider. */
export function grantedProvider (principal: Principal | null, provider: string): Principal {
  if (principal === null) throw new NoOrgContext()
  if (!principal.passthrough.includes(provider)) throw new PassthroughForbidden({ provider })
  return principal
}

/**
 * The catalog model a pass-through call names (a body's `model`, a Gemini path's), if the key may
 * use it: a model of that provider whose upstream name is `name`, or of which `name` is a dated
 * or versioned snapshot; else 404, and nothing is sent.
 */
export function grantedUpstreamModel (gateway: Gateway, principal: Principal, provider: string, name: string): CatalogModel {
  const model = gateway.catalog.forUpstream(provider, name, principal.models)
  if (model === undefined) throw new ModelNotFound({ model: name })
  return model
}

/**
 * The providers among `providers` that a /v1 call may go to, given the provider-side objects its
 * body names (`objects`, noted as the body was checked): those where the key's organization made
 * every one, or whose objects the operator shares; else 404 `object_not_found`, and nothing is
 * sent. A body that names nothing costs nothing.
 */
export function objectProviders (p: Pipe, providers: readonly string[], objects: BodyObjects): MaybePromise<readonly string[]> {
  return reachableProviders(p.gateway.config, p.gateway.store, p.request.principal?.org ?? null, providers, objects)
}

/** The key's globs over MCP tools (`{server}/{tool}`): none when it names none; null (any tool) when no key is asked for. */
export const toolGrants = (principal: Principal | null): readonly string[] | null => principal === null ? null : principal.mcp ?? []

/**
 * The MCP tool a tools/call names, if the key's `mcp` globs grant it: `find` looks the name up
 * among the servers' tools, within those grants; else the tool is unknown to the key (404,
 * `tool_not_found`: it cannot tell a tool it may not call from one that does not exist), and
 * nothing is sent.
 */
export async function grantedTool<T> (principal: Principal | null, name: string, find: (grants: readonly string[] | null) => Promise<T | undefined>): Promise<T> {
  const tool = await find(toolGrants(principal))
  if (tool === undefined) throw new McpToolNotFound({ tool: name })
  return tool
}

/** The tags header's name as Node.js keys it (lower case), made once per name. */
const lower = new Map<string, string>()
function tagHeader (name: string): string {
  let l = lower.get(name)
  if (l === undefined) { l = name.toLowerCase(); lower.set(name, l) }
  return l
}

/**
 * A tool the provider runs itself and bills per use (a web search, code execution) is called only
 * on a model whose price sheet names its per-use price (`pricing.server_tools`): else 400
 * `server_tool_unpriced`, and nothing is sent, since the gateway could neither hold for it nor
 * charge it. Only where it can reach a provider that runs it: a pass-through call, or a provider
 * of the client's own protocol (translation to another protocol drops a server tool, and says so
 * in Dropped-Params).
 */
function refuseUnpricedTools (p: Pipe, model: CatalogModel | null, body: Json): void {
  if (body.tools === undefined && body.web_search_options === undefined) return
  const tools = serverTools(body)
  if (tools.size === 0) return
  const unpriced = unpricedServerTools(tools, model?.price ?? null)
  if (unpriced.length > 0 && reachesServerTools(p, model)) throw new ServerToolUnpriced({ tool: unpriced[0] as string, model: model?.id ?? String(body.model ?? '') })
  if (p.call.protocol === 'messages') capServerTools(body)
}

/** Anthropic's searches and fetches without a `max_uses` get the cap the hold counts them at, so that the provider keeps to it. */
function capServerTools (body: Json): void {
  if (!Array.isArray(body.tools)) return
  for (const tool of body.tools as unknown[]) {
    if (tool === null || typeof tool !== 'object') continue
    const t = tool as Json
    if (typeof t.type === 'string' && /^web_(search|fetch)_\d{8}$/.test(t.type) && t.max_uses === undefined) t.max_uses = DEFAULT_SERVER_TOOL_USES
  }
}

/** Whether a call's body goes to a provider as the client wrote it (its server tools with it): pass-through, or a provider of the client's protocol. */
function reachesServerTools (p: Pipe, model: CatalogModel | null): boolean {
  const { call } = p
  if (call.endpoint === 'passthrough' || model === null) return true
  const client = call.protocol
  return model.providers.some((id) => {
    const provider = p.gateway.config.providers.find((c) => c.id === id)
    return provider === undefined || provider.protocol === client || (client === 'responses' && provider.responses === true)
  })
}

/**
 * Runs the admission hooks (which may change the body, or refuse the call by throwing) and
 * resolves with the body as they left it. `model` is null only for a pass-through call that
 * names no model (a provider's file or batch listing). `answerable`: a plugin may answer the call
 * itself (the model call routes).
 */
export function admit (p: Pipe, model: CatalogModel | null, body: Json, answerable = false): MaybePromise<Json> {
  const { call } = p
  const names = p.gateway.headers
  call.tagged(callTags(p.request.headers, tagHeader(names.tags), names.tags, call.endpoint, body))
  if (call.billable) refuseUnpricedTools(p, model, body)
  call.admittedBody(body)
  if (p.hooks.onAdmission.length === 0) return body
  const ctx: AdmissionContext = {
    request: p.request,
    reply: p.reply,
    call,
    principal: p.request.principal,
    model,
    body,
    keepContent: () => { call.keepContent() },
    answer: answerable ? (answer) => { call.answeredByPlugin(answer) } : undefined
  }
  return then(runSeriesUntil(p.hooks.onAdmission, ctx, () => call.pluginAnswer !== null), () => {
    call.admittedBody(ctx.body)
    return ctx.body
  })
}
