import type { Test } from 'tap'
import Database from 'better-sqlite3'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { KEY_A, mockCatalog, spawnGateway, type SpawnedGateway } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// `modelgate serve --workers 2` on one SQLite file, for the race suites (races.test.ts, and
// races-kill.slow.test.ts for a worker killed under load): the gateway, a call through it on a
// fresh connection (so that the kernel spreads the calls over both workers), and the ledger as
// the file holds it.

export const ADMIN = 'races-admin-token-0123456789abcdef'
export const INITIAL_USD = 25

export interface Gateway { gw: SpawnedGateway, mock: MockUpstream, db: string, base: string }

// A live worker must never be taken for dead: stale_hold_s is kept well above how long a loaded
// machine may hold a worker's event loop (a lock wait can take busy_timeout, 5 s), except where a
// dead worker's lease must be seen released within the test.
export async function twoWorkers (t: Test, extra: Record<string, unknown> = {}, tenants?: unknown[], env: Record<string, string> = {}, staleHoldS = 10): Promise<Gateway> {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const db = join(tempDir('races'), 'gw.db')
  const gw = await spawnGateway(t, {
    store: { sqlite: db, stale_hold_s: staleHoldS },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth', options: { cache_ttl_s: 60 } }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }],
    providers: c.providers,
    models: c.models,
    tenants: tenants ?? [{ org: 'acme', balance_usd: INITIAL_USD, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }],
    ...extra
  }, ['--workers', '2'], env)
  return { gw, mock, db, base: `http://127.0.0.1:${gw.port}` }
}

/** How many calls of `chat` had no answer within its 5 s, over the test file. */
export const unanswered = { count: 0 }

export async function chat (g: Gateway, key = KEY_A, extra: Record<string, unknown> = {}): Promise<{ status: number, text: string, trace: string }> {
  try {
    const res = await fetch(`${g.base}/v1/chat/completions`, {
      method: 'POST',
      signal: AbortSignal.timeout(5000),
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model: 'openai/gpt-test', max_tokens: 200, messages: [{ role: 'user', content: 'x' }], ...extra })
    })
    return { status: res.status, text: await res.text(), trace: res.headers.get('x-svc-trace-id') ?? '' }
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') unanswered.count++
    return { status: 0, text: '', trace: '' }
  }
}

export function ledger (db: string, orgId = 'acme'): { balance: number, held: number, spent: number, recorded: number, records: number, refused: number } {
  const raw = new Database(db, { readonly: true, fileMustExist: true })
  try {
    const org = raw.prepare('SELECT balance_nano AS balance, held_nano AS held, spent_nano AS spent FROM organizations WHERE id = ?').get(orgId) as { balance: number, held: number, spent: number }
    // the calls that were answered (or failed at a provider), and the calls refused before any
    const usage = raw.prepare("SELECT coalesce(sum(status <> 'refused'), 0) AS records, coalesce(sum(status = 'refused'), 0) AS refused, coalesce(sum(cost_nano), 0) AS recorded FROM usage_records_all WHERE org_id = ?").get(orgId) as { records: number, refused: number, recorded: number }
    return { ...org, ...usage }
  } finally {
    raw.close()
  }
}

/** The pids of a primary's workers. */
export const workerPids = (primary: number): number[] => {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(primary)], { encoding: 'utf8' }).split('\n').map((s) => Number(s.trim())).filter((n) => n > 0)
  } catch {
    return []
  }
}
