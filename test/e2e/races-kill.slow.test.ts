import t from 'tap'
import Database from 'better-sqlite3'
import { eventually } from '../helper.js'
import { chat, INITIAL_USD, ledger, twoWorkers, unanswered, workerPids } from './two-workers.js'

// A worker of `modelgate serve --workers 2` killed with SIGKILL under load loses no record of a
// response its clients completed, leaves the ledger balanced, is replaced by the primary, and its
// balance lease is released by the live worker within stale_hold_s. (races.test.ts: quota, balance
// and revocation raced over both workers.) Slow, so in `npm run test:slow`.

t.test('kill -9 of a worker under load: completed responses all recorded, ledger balanced, worker replaced, lease released', async (t) => {
  const g = await twoWorkers(t, {}, undefined, {}, 1.5)
  await eventually(5000, () => workerPids(g.gw.pid), (p) => p.length === 2)
  const before = workerPids(g.gw.pid)
  t.equal(before.length, 2, 'two workers')
  g.mock.faults = { delayMs: 20 }
  const completed: string[] = []
  let failed = 0
  let stop = false
  const client = async (): Promise<void> => {
    // eslint-disable-next-line no-unmodified-loop-condition -- `stop` is set by the test once the load has run long enough
    while (!stop) {
      const r = await chat(g)
      if (r.status === 200 && r.text.includes('chat.completion')) completed.push(r.trace)
      else failed++
    }
  }
  const clients = Array.from({ length: 12 }, client)
  await eventually(20_000, () => completed.length, (n) => n >= 60)
  const victim = before[0] as number
  process.kill(victim, 'SIGKILL')
  const atKill = completed.length
  // the load goes on, served by the live worker and then by the replacement too
  await eventually(20_000, () => completed.length, (n) => n >= atKill + 60)
  const after = await eventually(15_000, () => workerPids(g.gw.pid), (p) => p.length === 2 && !p.includes(victim))
  stop = true
  await Promise.all(clients)
  t.equal(after.length, 2, 'the primary forked a replacement')
  t.notOk(after.includes(victim), 'the dead worker is gone')
  t.comment(`${completed.length} completed responses, ${failed} calls cut or refused around the kill, ${unanswered.count} with no answer in 5 s`)

  // the dead worker's lease is released by the live ones once it has been silent for stale_hold_s
  const l = await eventually(8000, () => ledger(g.db), (v) => v.held === 0)
  t.equal(l.held, 0, 'no hold left after stale_hold_s')
  t.equal(l.balance + l.spent, INITIAL_USD * 1e9, 'balance + spent = initial')
  t.equal(l.spent, l.recorded, 'every charge has its record, and every record its charge')
  const raw = new Database(g.db, { readonly: true })
  const recorded = new Set((raw.prepare('SELECT trace_id FROM usage_records_all').all() as Array<{ trace_id: string }>).map((r) => r.trace_id))
  raw.close()
  const missing = completed.filter((trace) => !recorded.has(trace))
  t.same(missing, [], 'every completed response has its usage record')
})
