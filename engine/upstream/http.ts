import { Pool, type Dispatcher } from 'undici'
import type { ProviderConfig } from '../../config/schema.js'
import type { Platform } from './platforms/index.js'
import type { UpstreamClient, UpstreamRequest, UpstreamResponse } from './types.js'

// One keep-alive undici pool per provider. The provider's own credentials are set here and
// nowhere else (its platform says which and how: a key in a header, a token, a signature of the
// final bytes); the client's key never leaves the gateway. headersTimeout bounds the wait for
// the upstream to start answering, bodyTimeout the idle gap inside a body (server.request_timeout_s).

export interface HttpClientOptions { timeoutMs: number, platform: Platform }

export function createHttpClient (provider: ProviderConfig, opts: HttpClientOptions): UpstreamClient {
  const platform = opts.platform
  const base = new URL(platform.baseUrl)
  const basePath = base.pathname.replace(/\/+$/, '')
  const pool = new Pool(base.origin, {
    connections: provider.connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs
  })
  // the provider's configured headers go with every request, a pass-through's too, and win over a
  // client's header of any case (Node gives the client's names in lower case); the platform's
  // credentials win over both
  const configured: Record<string, string> = {}
  for (const [name, value] of Object.entries(provider.headers ?? {})) configured[name.toLowerCase()] = value
  const fixed: Record<string, string> = { 'content-type': 'application/json', ...configured }

  return {
    id: provider.id,
    protocol: provider.protocol,
    responses: provider.responses,
    platform,
    get secrets () { return platform.secrets() },
    async request (req: UpstreamRequest): Promise<UpstreamResponse> {
      const headers: Record<string, string | string[]> = { ...req.headers, ...(req.forwarded === true ? configured : fixed) }
      if (provider.protocol === 'messages' && headers['anthropic-version'] === undefined) headers['anthropic-version'] = '2023-06-01'
      const method = (req.method ?? 'POST') as Dispatcher.HttpMethod
      const path = basePath + req.path === '' ? '/' : basePath + req.path
      const auth = platform.authorize({ method, path, headers, body: req.body })
      Object.assign(headers, auth instanceof Promise ? await auth : auth)
      const res = await pool.request({ method, path, headers, body: req.body, signal: req.signal })
      // a platform's own stream framing becomes the SSE its protocol's mapper reads (model calls only: a pass-through relays the bytes)
      const decode = platform.decodeStream
      if (decode !== undefined && req.forwarded !== true && res.statusCode < 300) {
        const type = res.headers['content-type']
        return { statusCode: res.statusCode, headers: res.headers, body: decode(res.body, Array.isArray(type) ? type[0] : type) }
      }
      return { statusCode: res.statusCode, headers: res.headers, body: res.body }
    },
    async close (): Promise<void> {
      await pool.close()
      await platform.close?.()
    }
  }
}
