import { Readable } from 'node:stream'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { McpError, type CallToolRequest, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js'
import { buildInfo } from '../paths.js'
import type { Json } from '../plugins/api/index.js'
import { errorInput } from '../engine/gateway/core.js'
import { jsonRpcError, McpBatch, McpMethodNotAllowed, McpServerNotFound, type GatewayError } from '../engine/kernel/errors.js'
import { grantedTool, toolGrants } from '../engine/gateway/gate.js'
import { answer, JsonRpcError } from '../engine/mcp/endpoint.js'
import { announceVersion, ResultTooLarge, ServerUnavailable } from '../engine/mcp/link.js'
import type { McpServers, ToolTarget } from '../engine/mcp/servers.js'
import { callRunner, type ToolCallSpec } from './v1/run-call.js'

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
  servers: McpServers
  request: FastifyRequest
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
 * A tools/call as the call runner runs it (routes/v1/run-call.ts), through the gate as a model
 * call: the tool among those the key's grants allow, else it is unknown to the key and nothing is
 * sent; the call priced per call, through the admission hooks; the tool called on its server,
 * the server's messages and answer masked and through the response hooks; the call ended.
 */
function toolCall (r: McpRequest, params: CallToolRequest['params'], progress: ((pr: Progress) => void) | null): ToolCallSpec {
  const { request, servers } = r
  let target: ToolTarget
  const meta = params._meta === undefined ? undefined : Object.fromEntries(Object.entries(params._meta).filter(([k]) => k !== 'progressToken'))
  const failure = (err: unknown): void => { request.log.warn({ mcp_server: target.link.id, tool: target.name, err: err instanceof Error ? err.message : String(err) }, 'MCP tool call failed') }
  return {
    target: 'tool',
    endpoint: 'mcp.tools_call',
    protocol: 'mcp',
    asked: r.server === null ? params.name : `${r.server}/${params.name}`,
    resolve: async () => {
      target = await grantedTool(request.principal, params.name, async (grants) => await servers.find(params.name, r.server, grants))
      return { provider: target.link.id, model: target.ref, priceNano: target.priceNano, body: { name: target.name, arguments: params.arguments ?? {} } }
    },
    invoke: async (body, during) => {
      const onprogress = progress === null
        ? undefined
        : (pr: Progress) => {
            const masked = servers.mask({ ...pr })
            // a message passes the hooks as the notification the client gets
            if (masked.message === undefined) during.message(masked as Json, (out) => { progress(out as Progress) }, false)
            else during.message({ method: 'notifications/progress', params: masked as Json }, (out) => { progress((out as { params?: Progress }).params ?? masked) }, true)
          }
      const args = (body.arguments ?? {}) as CallToolRequest['params']['arguments']
      const result = await servers.call(target, request.principal?.org ?? '', { name: target.name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) }, {
        signal: during.signal,
        timeoutMs: target.timeoutMs,
        onprogress
      })
      return servers.mask(result) as Json
    },
    failed: (err) => {
      if (err instanceof ServerUnavailable) {
        failure(err)
        return { outcome: err.timedOut ? 'timeout' : 'network_error', error: servers.mask(err.reason), status: err.timedOut ? 'timeout' : 'upstream_error', answer: { isError: true, content: [{ type: 'text', text: servers.mask(err.message) }] } }
      }
      if (err instanceof ResultTooLarge) {
        // the server answered, but more than the gateway keeps: not relayed, so not charged
        failure(err)
        return { outcome: 'server_error', error: err.message, status: 'upstream_error', answer: { isError: true, content: [{ type: 'text', text: err.message }] } }
      }
      if (err instanceof McpError) {
        // the server's own error answer, relayed as it is but for the secrets and what the hooks change
        return {
          outcome: 'client_error',
          error: servers.mask(err.message),
          status: 'upstream_error',
          answer: servers.mask({ error: { code: err.code, message: err.message.replace(/^MCP error -?\d+: /, ''), data: err.data } }) as Json,
          raise: (answer) => {
            const e = answer.error as { code: number, message: string, data?: unknown }
            return new JsonRpcError(e.code, e.message, e.data)
          }
        }
      }
      request.log.error({ err, mcp_server: target.link.id }, 'MCP tool call failed')
      return { outcome: 'network_error', error: servers.mask(err instanceof Error ? err.message : String(err)), status: 'upstream_error', answer: { isError: true, content: [{ type: 'text', text: `MCP server ${target.link.id} failed to answer` }] } }
    },
    refusal: (err) => inBand(request, err)
  }
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
  const run = callRunner(fastify)

  const handle = async (request: FastifyRequest, reply: FastifyReply, server: string | null): Promise<FastifyReply> => {
    if (server !== null && !servers.has(server)) throw new McpServerNotFound({ server })
    const body = request.body
    // a call's state is its request's (its idempotency key, its hold): one call per request
    if (Array.isArray(body) && body.length > 1 && body.some(isToolsCall)) throw new McpBatch()
    const r: McpRequest = { servers, request, server }
    const grants = toolGrants(request.principal)
    const { response, done } = await answer('modelgate', version, request, body, {
      list: async () => await servers.list(server, grants),
      call: async (params, progress) => await run(request, reply, toolCall(r, params, progress)) as CallToolResult
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
