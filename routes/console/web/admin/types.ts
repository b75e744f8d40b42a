// What the admin API answers, as far as the page reads it.

export interface List<T> { object: 'list', data: T[], next_cursor?: string | null }

export interface QuotaView { limit: string, used: string, unit: 'tokens' | 'usd', per: string, resets_at: string }
export interface Org { id: string, balance_usd: string, held_usd: string, spent_usd: string, uncollected_usd: string, quota: QuotaView | null, projects: Array<{ id: string, quota: QuotaView | null }> }

export interface Key {
  id: string
  org: string
  project: string
  name: string
  models: string[]
  passthrough: string[]
  /** Globs over server/tool: the MCP tools the key may list and call. */
  mcp: string[]
  created_at: string
  expires_at: string | null
  limits: { rpm: number | null, tpm: number | null } | null
  budget: { limit: string, used: string, unit: string, per: string, resets_at: string } | null
  last_used_at: string | null
  revoked: boolean
  replaces?: string | null
}
export interface NewKey extends Key { key: string }
export interface Rotation { id: string, key: string, replaces: string, old_valid_until: string }

export interface SummaryRow {
  bucket_start?: string
  org?: string | null
  model?: string | null
  tag?: string | null
  calls: number
  errors: number
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  cost_usd: string
  saved_usd: string
}

export interface UsageRecord {
  id: string
  created_at: string
  trace_id: string
  org: string
  project: string
  key_id: string | null
  endpoint: string
  model: string
  provider: string | null
  stream: boolean
  status: string
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  total_tokens: number
  cache_write_tokens: number
  images: number
  cost_usd: string
  /** The cost by part (decimal strings) and the tier billed at; null for records made before it was kept. */
  cost_detail: { input: string, cached_input: string, cache_write: string, output: string, images: string, per_request: string, tool_call: string, tier: number | null } | null
  latency_ms: number
  ttft_ms: number | null
  cache_hit: boolean
  saved_usd: string
}
/** One attempt at a provider; `outcome` is ok, client_error, server_error, network_error, timeout, aborted or request_error. */
export interface Attempt { provider: string, upstream_model: string | null, outcome?: string, status: number | null, error: string | null, latency_ms: number | null }
export interface CallDetail extends UsageRecord {
  attempts?: Attempt[]
  dropped_params?: string[]
  content?: { request: string | null, response: string | null } | null
}

export interface Provider {
  id: string
  protocol: string
  base_url: string | null
  configured: boolean
  breaker: 'closed' | 'open' | 'half_open'
  healthy: boolean
  avg_latency_ms: number | null
  recent_failures: Array<{ at: string, status: number | string | null, error: string | null, pid?: number }>
  /** Each worker's own breaker and latency average (a worker keeps its own). */
  workers?: Array<{ pid: number, breaker: 'closed' | 'open' | 'half_open', avg_latency_ms: number | null }>
}

/** A catalog price that differs from the price database's (GET /admin/v1/prices/check). */
export interface PriceDifference { model: string, field: string, catalog: string, reference: string, source: string }
export interface PriceCheck { data: PriceDifference[], unknown: string[], checked: number }
export interface McpServer {
  id: string
  transport: 'http' | 'stdio'
  status: 'ready' | 'starting' | 'down'
  tools: string[]
  last_error: string | null
  workers?: Array<{ pid: number, status: 'ready' | 'starting' | 'down' }>
}

export interface Plugin { name: string, module?: string | null, enabled: boolean, options: unknown }
export interface Plugins { generation: number | null, data: Plugin[] }
export interface Reloaded { reloaded: true, changes: string[], generation?: number }

/** A live console session, as an admin sees it: named by its handle, never by its id. */
export interface OperatorSession { id: string, sub: string, email: string | null, name: string | null, role: 'admin' | 'viewer' | 'org_admin', org: string | null, created_at: string, expires_at: string, current: boolean }

/** An alert's webhook delivery (GET /admin/v1/alerts/deliveries). */
export interface Delivery {
  id: string
  type: string
  webhook: string
  status: 'pending' | 'delivered' | 'failed'
  attempts: number
  created_at: string
  next_attempt_at: string | null
  delivered_at: string | null
  last_status: number | null
  last_error: string | null
  event: { type: string, created_at: string, data: Record<string, unknown> }
}
