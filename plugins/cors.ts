import type {} from '@fastify/cors'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { definePlugin, RATE_LIMIT_HEADER_NAMES } from './api/index.js'

// Phase: onRequest, first in the chain, so that browser preflights (OPTIONS) are answered before
// the rate limit and auth see them. Built on @fastify/cors. Allowed request headers: Authorization,
// Content-Type, Accept-Language and X-Locale, the ones the official SDKs (Google's included) and
// Claude Code send, any X-Stainless-* header the browser asks for, the response cache's request
// headers ({prefix}Cache, Cache-Control), and MCP's (Mcp-Protocol-Version, Mcp-Session-Id,
// Last-Event-ID). Exposed: the diagnostic headers, the cache's ({prefix}Cache, Age), Retry-After,
// x-should-retry, and MCP's Mcp-Session-Id and WWW-Authenticate.

const options = Type.Object({
  origins: Type.Array(Type.String({ minLength: 1 }), { default: ['*'] }),
  credentials: Type.Boolean({ default: false }),
  max_age_s: Type.Integer({ default: 600, minimum: 0 })
}, { additionalProperties: false })

const FIXED_HEADERS = [
  'authorization', 'content-type', 'accept-language', 'x-locale', 'idempotency-key', 'x-api-key',
  'anthropic-version', 'anthropic-beta', 'anthropic-dangerous-direct-browser-access', 'x-goog-api-key', 'x-goog-api-client',
  // what an MCP client in a browser sends to /mcp
  'mcp-protocol-version', 'mcp-session-id', 'last-event-id'
]
// an X-Stainless-* name the browser asks for, echoed only when it is a header name (an RFC 9110 token)
const STAINLESS = /^x-stainless-[!#$%&'*+.^_`|~0-9a-z-]+$/

export default definePlugin({
  name: 'cors',
  description: 'CORS for browsers: preflights answered before auth; the headers of the official SDKs allowed',
  options,
  plugin: async (fastify, opts) => {
    const names = fastify.gateway.headers
    const cache = `${fastify.gateway.config.server.header_prefix}Cache`
    const fixed = new Set([...FIXED_HEADERS, names.trace.toLowerCase(), names.tags.toLowerCase(), cache.toLowerCase(), 'cache-control'])
    const allowAny = opts.origins.includes('*')
    const allowed = new Set(opts.origins)
    const base = {
      origin: allowAny ? (opts.credentials ? true : '*') : [...allowed],
      credentials: opts.credentials,
      maxAge: opts.max_age_s,
      // lists as the header values they become: @fastify/cors joins a list again on every answer
      methods: 'GET, POST, DELETE, OPTIONS',
      exposedHeaders: [names.trace, names.model, names.provider, names.droppedParams, names.fallback, names.overhead, cache, 'Age', 'Retry-After', 'x-should-retry', 'Mcp-Session-Id', 'WWW-Authenticate', ...RATE_LIMIT_HEADER_NAMES].join(', '),
      allowedHeaders: [...fixed].join(', ')
    }
    // static options: @fastify/cors re-normalizes delegated options on every request
    // strictPreflight off: an OPTIONS without Origin or Access-Control-Request-Method is answered
    // like a preflight (204) instead of with @fastify/cors's own text/plain 400
    // loaded when the chain is mounted, not with the plugin's definition (`config check` reads its options alone)
    const { default: cors } = await import('@fastify/cors')
    await fastify.register(cors, { hook: 'onRequest', strictPreflight: false, ...base })
    // a preflight is answered by @fastify/cors in its onRequest hook; the X-Stainless-* headers it
    // asks for (they have many names) are added to its allow list on the way out
    const allowList = base.allowedHeaders
    fastify.addHook('onSend', (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, p: unknown) => void) => {
      if (request.method === 'OPTIONS') {
        const asked = String(request.headers['access-control-request-headers'] ?? '').split(',').map((h) => h.trim().toLowerCase())
        const stainless = asked.filter((h) => STAINLESS.test(h) && !fixed.has(h))
        if (stainless.length > 0 && reply.hasHeader('access-control-allow-headers')) reply.header('access-control-allow-headers', [allowList, ...stainless].join(', '))
      }
      done(null, payload)
    })
  }
})
