import type { Config } from './schema.js'
import { isObj } from '../engine/kernel/json.js'

// What a reload changes, in lines an operator reads in the log and the admin answer:
// "models: added openai/gpt-x", "plugins: disabled quota", "server.request_timeout_s: 120 → 60".
// Secrets (API keys, the admin token, header values) are never printed, only said to change.

/** Keys whose change needs a restart: the listening address and the store stay as they are. */
export const RESTART_KEYS = ['server.host', 'server.port', 'server.shutdown_timeout_s', 'store']

const SECRET = /(^|\.)(token|tokens|api_key|key|headers|client_secret)(\.|$)/

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)

function byId<T> (items: T[], id: (t: T) => string): Map<string, T> {
  return new Map(items.map((t) => [id(t), t]))
}

/** Added, removed and changed entries of a list keyed by id. */
function listChanges<T> (section: string, before: T[], after: T[], id: (t: T) => string): string[] {
  const a = byId(before, id)
  const b = byId(after, id)
  const out: string[] = []
  for (const k of b.keys()) if (!a.has(k)) out.push(`${section}: added ${k}`)
  for (const k of a.keys()) if (!b.has(k)) out.push(`${section}: removed ${k}`)
  for (const [k, v] of b) if (a.has(k) && !same(a.get(k), v)) out.push(`${section}: changed ${k}`)
  return out
}

/** Leaf values of a section that differ, as `path: old → new` (secrets masked). */
function leafChanges (path: string, before: unknown, after: unknown, out: string[]): void {
  if (same(before, after)) return
  // a section added or removed (sso) is told leaf by leaf too, so that its secrets stay masked
  if (before === undefined && isObj(after)) before = {}
  if (after === undefined && isObj(before)) after = {}
  if (isObj(before) && isObj(after) && !SECRET.test(path)) {
    for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) leafChanges(`${path}.${k}`, before[k], after[k], out)
    return
  }
  const restart = RESTART_KEYS.some((k) => path === k || path.startsWith(k + '.')) ? ' (takes effect at the next start)' : ''
  if (SECRET.test(path)) out.push(`${path}: changed${restart}`)
  else out.push(`${path}: ${JSON.stringify(before) ?? 'unset'} → ${JSON.stringify(after) ?? 'unset'}${restart}`)
}

function pluginChanges (before: Config['plugins'], after: Config['plugins']): string[] {
  const out: string[] = []
  const on = (list: Config['plugins']): Map<string, Config['plugins'][number]> => new Map(list.filter((p) => p.enabled).map((p) => [p.name, p]))
  const a = on(before)
  const b = on(after)
  for (const name of b.keys()) if (!a.has(name)) out.push(`plugins: enabled ${name}`)
  for (const name of a.keys()) if (!b.has(name)) out.push(`plugins: disabled ${name}`)
  for (const [name, p] of b) {
    const q = a.get(name)
    if (q !== undefined && (!same(q.options ?? {}, p.options ?? {}) || q.module !== p.module)) out.push(`plugins: changed the options of ${name}`)
  }
  const order = (m: Map<string, unknown>, other: Map<string, unknown>): string[] => [...m.keys()].filter((n) => other.has(n))
  if (!same(order(a, b), order(b, a))) out.push(`plugins: reordered (${[...b.keys()].join(', ')})`)
  return out
}

export function configChanges (before: Config, after: Config): string[] {
  const out: string[] = []
  out.push(...listChanges('providers', before.providers, after.providers, (p) => p.id))
  out.push(...listChanges('models', before.models, after.models, (m) => m.id))
  out.push(...pluginChanges(before.plugins, after.plugins))
  out.push(...listChanges('tenants', before.tenants, after.tenants, (t) => t.org))
  out.push(...listChanges('mcp.servers', before.mcp.servers, after.mcp.servers, (s) => s.id))
  const { servers: _before, ...mcpBefore } = before.mcp
  const { servers: _after, ...mcpAfter } = after.mcp
  leafChanges('mcp', mcpBefore, mcpAfter, out)
  // a webhook by its address without the query string (which may carry the receiver's token); its secret never shown
  const hook = (w: Config['alerts']['webhooks'][number]): string => { const u = new URL(w.url); return `${u.origin}${u.pathname}` }
  out.push(...listChanges('alerts.webhooks', before.alerts.webhooks, after.alerts.webhooks, hook))
  const { webhooks: _hb, ...alertsBefore } = before.alerts
  const { webhooks: _ha, ...alertsAfter } = after.alerts
  leafChanges('alerts', alertsBefore, alertsAfter, out)
  for (const section of ['server', 'store', 'admin', 'sso', 'translation', 'upstream', 'metrics', 'tracing'] as const) {
    leafChanges(section, before[section], after[section], out)
  }
  return out
}
