import { Pool, type Dispatcher } from 'undici'
import type { ProviderConfig } from '../../config/schema.js'
import { credentialsOf } from './credentials.js'
import type { UpstreamClient, UpstreamRequest, UpstreamResponse } from './types.js'

// One keep-alive undici pool per provider. The provider's own credentials are set here and
// nowhere else; the client's key never leaves the gateway. headersTimeout bounds the wait for
// the upstream to start answering, bodyTimeout the idle gap inside a body (server.request_timeout_s).

export interface HttpClientOptions { timeoutMs: number }

export function createHttpClient (provider: ProviderConfig, opts: HttpClientOptions): UpstreamClient {
  const base = new URL(provider.base_url as string)
  const basePath = base.pathname.replace(/\/+$/, '')
  const pool = new Pool(base.origin, {
    connections: provider.connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs
  })
  // the provider's credentials and fixed headers go with every request, a pass-through's too, and
  // win over a client's header of any case (Node gives the client's names in lower case)
  const credentials: Record<string, string> = {}
  for (const [name, value] of Object.entries(provider.headers ?? {})) credentials[name.toLowerCase()] = value
  if (provider.api_key !== '') {
    if (provider.protocol === 'openai') credentials.authorization = `Bearer ${provider.api_key}`
    else if (provider.protocol === 'gemini') credentials['x-goog-api-key'] = provider.api_key
    else credentials['x-api-key'] = provider.api_key
  }
  const fixed: Record<string, string> = { 'content-type': 'application/json', ...credentials }

  return {
    id: provider.id,
    protocol: provider.protocol,
    responses: provider.responses,
    secrets: credentialsOf(provider),
    async request (req: UpstreamRequest): Promise<UpstreamResponse> {
      const headers: Record<string, string | string[]> = { ...req.headers, ...(req.forwarded === true ? credentials : fixed) }
      if (provider.protocol === 'messages' && headers['anthropic-version'] === undefined) headers['anthropic-version'] = '2023-06-01'
      const res = await pool.request({ method: (req.method ?? 'POST') as Dispatcher.HttpMethod, path: basePath + req.path === '' ? '/' : basePath + req.path, headers, body: req.body, signal: req.signal })
      return { statusCode: res.statusCode, headers: res.headers, body: res.body }
    },
    async close (): Promise<void> { await pool.close() }
  }
}
