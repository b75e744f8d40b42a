import type { FastifyInstance } from 'fastify'
import type { Config } from '../config/schema.js'
import { notFound } from '../engine/gateway/core.js'
import type { McpServers } from '../engine/mcp/servers.js'
import passthroughRoutes from './passthrough.js'
import geminiRoutes from './v1/gemini.js'
import v1Routes from './v1/index.js'

// The API's own route groups, mounted in the chain's API scope (engine/host): /v1, Google's
// Gemini API under /v1beta (its method calls under /v1 too), the MCP servers' tools at /mcp when
// the config names some, and each pass-through provider's /passthrough/{id}. Unknown paths in a
// group pass through the chain (rate limit, auth) before their 404.

/** The prefixes of the API's own groups: a route in none of them is a plugin's. */
export const API_PREFIXES = ['/v1', '/v1beta', '/passthrough', '/mcp'] as const

export async function apiRoutes (api: FastifyInstance, config: Config, mcp: McpServers | null = null): Promise<void> {
  await api.register(async (v1) => {
    v1.setNotFoundHandler(notFound)
    await v1.register(v1Routes)
  }, { prefix: '/v1' })
  await api.register(async (v1beta) => {
    v1beta.setNotFoundHandler(notFound)
    await v1beta.register(geminiRoutes, { underOpenAI: false })
  }, { prefix: '/v1beta' })
  if (mcp !== null) {
    // the MCP SDK is loaded only for a config that names some servers
    const { default: mcpRoutes } = await import('./mcp.js')
    await api.register(async (scope) => {
      scope.setNotFoundHandler(notFound)
      await scope.register(mcpRoutes, { servers: mcp })
    }, { prefix: '/mcp' })
  }
  const passthrough = config.providers.filter((p) => p.passthrough && p.base_url !== undefined)
  if (passthrough.length === 0) return
  await api.register(async (scope) => {
    scope.setNotFoundHandler(notFound)
    await scope.register(passthroughRoutes, { providers: passthrough })
  }, { prefix: '/passthrough' })
}
