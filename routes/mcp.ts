import { Readable } from 'node:stream'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { McpError, type CallToolRequest, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js'
import { buildInfo } from '../paths.js'
import type { Gateway, Json } from '../plugins/api/index.js'
import { errorInput, hooksOf, startCall } from '../engine/gateway/core.js'
import { Internal, isGatewayError, jsonRpcError, McpBatch, McpMethodNotAllowed, McpServerNotFound, refusalCode, type GatewayError } from '../engine/kernel/errors.js'
import type { HookRegistry } from '../engine/gateway/hooks.js'
import { admit, grantedTool, toolGrants } from '../engine/gateway/gate.js'
import { responseHooks, type Pipe } from '../engine/gateway/pipeline.js'
import { answer, JsonRpcError } from '../engine/mcp/endpoint.js'
import { announceVersion, ResultTooLarge, ServerUnavailable } from '../engine/mcp/link.js'
import type { McpServers, ToolTarget } from '../engine/mcp/servers.js'
import type { AttemptOutcome, AttemptReport } from '../engine/upstream/index.js'

// The MCP endpoint: POST /mcp (every server's tools, as `{server}__{tool}`) and POST /mcp/{server}
// (one server's, under their own names), MCP's Streamable HTTP transport, answered by the
// gateway's own MCP server (engine/mcp/endpoint.ts). These routes are in the API scope, so the
// chain's hooks (the IP rate limit, auth: Bearer, 401 with WWW-Authenticate) cover every request.
// A tools/call is a call like a model call: the key's grants (its `mcp` globs), then the
// admission hooks (expiry and revocation are auth's; rpm, budget and quota, balance, guardrails
// on the arguments), the tool called on its server within its time limit, the response hooks
// (guardrails on the result), and the call's end (usage record, charge, metrics) before the
// answer goes out. initialize, tools/list and the rest are no calls.
// What a server sends back reaches the client by three paths: its result, its JSON-RPC error, and
// its progress notifications' messages. On each, the servers' configured secrets are masked and
// then the response hooks run (their body is the result, `{error: {code, message, data}}`, or the
// notification `{method: 'notifications/progress', params}`).

const ROUTE = { family: 'mcp' as const }
// a POST may hold a tools/call: a call through the gate
const CALLS = { ...ROUTE, spends: true }

const { version } = buildInfo()
announceVersion(version)

/** What the handling of one HTTP request to the MCP endpoint shares. */
interface McpRequest {
  gateway: Gateway
  hooks: HookRegistry
  servers: McpServers
  request: FastifyRequest
  reply: FastifyReply
  /** /mcp/{server}: that server's tools, under their own names; null at /mcp. */
  server: string | null
}

const isToolsCall = (m: unknown): boolean => (m as { method?: unknown } | null)?.method === 'tools/call'

/** A gateway error as the JSON-RPC error answer to a request. */
function inBand (request: FastifyRequest, err: GatewayError): JsonRpcError {
  const e = jsonRpcError(errorInput(request, err))
  return new JsonRpcError(e.code, e.message, e.data)
}

/**
 * A tools/call's admission, through the gate as a model call's (routes/v1/call.ts): the tool among
 * those the key's grants allow, else it is unknown to the key and nothing is sent; then the call,
 * priced per call, through the admission hooks. Resolves with the call's pipeline and the tool's
 * arguments as the hooks left them.
 */
async function admitToolCall (r: McpRequest, params: CallToolRequest['params']): Promise<{ p: Pipe, target: ToolTarget, args: Json }> {
  // the call starts before the grant check, so that a tool the key may not call is a refused call of its own
  const call = startCall(r.gateway, r.request, r.reply, 'mcp.tools_call', 'mcp', r.hooks)
  const p: Pipe = { gateway: r.gateway, hooks: r.hooks, request: r.request, reply: r.reply, call }
  call.resolved(null, false, r.server === null ? params.name : `${r.server}/${params.name}`)
  let target: ToolTarget
  try {
    target = await grantedTool(r.request.principal, params.name, async (grants) => await r.servers.find(params.name, r.server, grants))
  } catch (err) {
    throw await refused(p, err)
  }
  call.resolved(null, false, target.ref)
  call.routedTo(target.link.id)
  call.pricedPerCall(target.priceNano)
  try {
    const body = await admit(p, null, { name: target.name, arguments: params.arguments ?? {} })
    return { p, target, args: (body.arguments ?? {}) as Json }
  } catch (err) {
    throw await refused(p, err)
  }
}

/** A call refused by a hook (at admission, or its result): it ends, and the refusal is its JSON-RPC error. */
async function refused (p: Pipe, err: unknown): Promise<JsonRpcError> {
  const known = isGatewayError(err) ? err : new Internal({ trace_id: p.request.id })
  if (!isGatewayError(err)) p.request.log.error({ err }, 'unhandled error')
  p.call.answering()
  try {
    await p.call.endOnError(known.statusCode, refusalCode(known))
  } catch (endErr) {
    p.request.log.error({ err: endErr }, 'end-of-call work failed')
  }
  return inBand(p.request, known)
}

/** Ends a call with a result: the usage record, the charge and the counts are in before it goes out. */
async function ended<T> (p: Pipe, status: 'ok' | 'upstream_error' | 'timeout', out: T): Promise<T> {
  p.call.answering()
  try {
    await p.call.end({ status, usage: null, complete: true, httpStatus: 200 })
  } catch (err) {
    p.request.log.error({ err }, 'end-of-call work failed')
  }
  return out
}

/** What the response hooks left of a server's output; a hook's refusal ends the call and is thrown as its JSON-RPC error. */
async function filtered (p: Pipe, body: Json): Promise<Json> {
  try {
    return await responseHooks(p, body)
  } catch (err) {
    throw await refused(p, err)
  }
}

/** A tools/call, from its admission to its result. */
async function toolCall (r: McpRequest, params: CallToolRequest['params'], progress: ((pr: Progress) => void) | null): Promise<CallToolResult> {
  const { p, target, args } = await admitToolCall(r, params)
  const { call } = p
  const abort = new AbortController()
  call.abort.once('abort', () => { abort.abort() })
  const report = (outcome: AttemptOutcome, start: number, error?: unknown): AttemptReport =>
    ({ provider: target.link.id, model: target.ref, outcome, status: null, start, end: performance.now(), n: 1, retry: false, failover: false, error })
  const meta = params._meta === undefined ? undefined : Object.fromEntries(Object.entries(params._meta).filter(([k]) => k !== 'progressToken'))
  // progress messages pass the hooks one after the other; a refusal of one cancels the call
  let relayed: Promise<void> = Promise.resolve()
  let blocked: unknown = null
  const onprogress = progress === null
    ? undefined
    : (pr: Progress) => {
        relayed = relayed.then(async () => {
          if (blocked !== null) return
          const masked = r.servers.mask({ ...pr })
          if (masked.message === undefined) { progress(masked); return }
          try {
            const out = await responseHooks(p, { method: 'notifications/progress', params: masked as Json }) as { params?: Progress }
            progress(out.params ?? masked)
          } catch (err) {
            blocked = err
            abort.abort()
          }
        })
      }
  const start = performance.now()
  call.attemptStarted(target.link.id)
  let result: CallToolResult
  try {
    result = await r.servers.call(target, r.request.principal?.org ?? '', { name: target.name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) }, {
      signal: abort.signal,
      timeoutMs: target.timeoutMs,
      onprogress
    })
  } catch (err) {
    if (blocked !== null) {
      call.attemptEnded(report('aborted', start))
      throw await refused(p, blocked)
    }
    if (abort.signal.aborted) {
      // the client left: the call ends as a client abort (Call.closed)
      call.attemptEnded(report('aborted', start))
      throw err
    }
    if (err instanceof ServerUnavailable) {
      call.attemptEnded(report(err.timedOut ? 'timeout' : 'network_error', start, r.servers.mask(err.reason)))
      r.request.log.warn({ mcp_server: target.link.id, tool: target.name, err: err.message }, 'MCP tool call failed')
      return await ended(p, err.timedOut ? 'timeout' : 'upstream_error', { isError: true, content: [{ type: 'text', text: r.servers.mask(err.message) }] })
    }
    if (err instanceof ResultTooLarge) {
      // the server answered, but more than the gateway keeps: not relayed, so not charged
      call.attemptEnded(report('server_error', start, err.message))
      r.request.log.warn({ mcp_server: target.link.id, tool: target.name, err: err.message }, 'MCP tool call failed')
      return await ended(p, 'upstream_error', { isError: true, content: [{ type: 'text', text: err.message }] })
    }
    if (err instanceof McpError) {
      // the server's own error answer, relayed as it is but for the secrets and what the hooks change
      call.attemptEnded(report('client_error', start, r.servers.mask(err.message)))
      await relayed
      const answer = await filtered(p, r.servers.mask({ error: { code: err.code, message: err.message.replace(/^MCP error -?\d+: /, ''), data: err.data } }) as Json)
      const e = answer.error as { code: number, message: string, data?: unknown }
      throw await ended(p, 'upstream_error', new JsonRpcError(e.code, e.message, e.data))
    }
    call.attemptEnded(report('network_error', start, r.servers.mask(err instanceof Error ? err.message : String(err))))
    r.request.log.error({ err, mcp_server: target.link.id }, 'MCP tool call failed')
    return await ended(p, 'upstream_error', { isError: true, content: [{ type: 'text', text: `MCP server ${target.link.id} failed to answer` }] })
  }
  await relayed
  if (blocked !== null) {
    call.attemptEnded(report('ok', start))
    throw await refused(p, blocked)
  }
  call.attemptEnded(report('ok', start))
  call.firstByte()
  const out = await filtered(p, r.servers.mask(result) as Json)
  if (call.keepsContent) call.answered(JSON.stringify(out))
  return await ended(p, 'ok', out as CallToolResult)
}

/** Sends what the SDK's transport answered, through the reply (its JSON, or its event stream as it comes). */
async function send (reply: FastifyReply, response: Response, done: (sent: boolean) => void): Promise<FastifyReply> {
  // the client left while the answer was made (a tools/call it gave up on): no one to send it to
  if (reply.raw.destroyed) {
    done(false)
    await response.body?.cancel()
    return reply
  }
  reply.raw.once('close', () => { done(reply.raw.writableFinished) })
  reply.status(response.status)
  response.headers.forEach((value, name) => { reply.header(name, value) })
  if (response.body === null) return reply.send()
  if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return reply.send(Readable.fromWeb(response.body as WebReadableStream))
  return reply.send(await response.text())
}

const mcpRoutes: FastifyPluginAsyncTypebox<{ servers: McpServers }> = async (fastify, { servers }) => {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)

  const handle = async (request: FastifyRequest, reply: FastifyReply, server: string | null): Promise<FastifyReply> => {
    if (server !== null && !servers.has(server)) throw new McpServerNotFound({ server })
    const body = request.body
    // a call's state is its request's (its idempotency key, its hold): one call per request
    if (Array.isArray(body) && body.length > 1 && body.some(isToolsCall)) throw new McpBatch()
    const r: McpRequest = { gateway, hooks, servers, request, reply, server }
    const grants = toolGrants(request.principal)
    const { response, done } = await answer('modelgate', version, request, body, {
      list: async () => await servers.list(server, grants),
      call: async (params, progress) => await toolCall(r, params, progress)
    })
    return await send(reply, response, done)
  }

  const notAllowed = async (): Promise<never> => { throw new McpMethodNotAllowed({}, { headers: { allow: 'POST' } }) }
  const params = Type.Object({ server: Type.String({ minLength: 1, maxLength: 200 }) })

  fastify.post('/', { config: CALLS }, async (request, reply) => await handle(request, reply, null))
  fastify.post('/:server', { config: CALLS, schema: { params } }, async (request, reply) => await handle(request, reply, request.params.server))
  for (const url of ['/', '/:server']) {
    fastify.get(url, { config: ROUTE }, notAllowed)
    fastify.delete(url, { config: ROUTE }, notAllowed)
  }
}

export default mcpRoutes
