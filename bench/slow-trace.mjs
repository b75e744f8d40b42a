// Preloaded into the gateway by slow-calls.ts (node --import): times each HTTP request from its
// `request` event to its response's `finish` (and how much of that the event loop was busy), each better-sqlite3 statement (BEGIN and COMMIT
// included: a transaction runs them as statements), each GC pause, and each upstream call until its answer's headers, all on the gateway's
// performance.now() clock. On SIGUSR2 it writes what it holds to $SLOWTRACE and starts over.
import diagnostics from 'node:diagnostics_channel'
import http from 'node:http'
import { createRequire } from 'node:module'
import { PerformanceObserver, performance } from 'node:perf_hooks'
import { renameSync, writeFileSync } from 'node:fs'

const requests = []
const gcs = []
const statements = []
const upstream = []

const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (event, req, res) {
  if (event === 'request') {
    const start = performance.now()
    const elu = performance.eventLoopUtilization()
    res.once('finish', () => { requests.push([start, performance.now(), performance.eventLoopUtilization(elu).active]) })
  }
  return emit.apply(this, arguments)
}

// the gateway loads better-sqlite3 from node_modules (it is not bundled): the same module, the same Statement class
const Database = createRequire(process.env.GW_ROOT + '/package.json')('better-sqlite3')
const probe = new Database(':memory:')
const Statement = Object.getPrototypeOf(probe.prepare('SELECT 1'))
probe.close()
for (const method of ['run', 'get', 'all']) {
  const original = Statement[method]
  Statement[method] = function () {
    const start = performance.now()
    try { return original.apply(this, arguments) } finally { statements.push([start, performance.now(), this.source.slice(0, 40)]) }
  }
}

// each upstream call from undici's request to its answer's headers (the gateway's undici: the channels are process-wide)
const sent = new WeakMap()
diagnostics.subscribe('undici:request:create', ({ request }) => { sent.set(request, performance.now()) })
diagnostics.subscribe('undici:request:headers', ({ request }) => { const s = sent.get(request); if (s !== undefined) upstream.push([s, performance.now()]) })

new PerformanceObserver((list) => { for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration]) }).observe({ entryTypes: ['gc'] })

process.on('SIGUSR2', () => {
  // written whole under another name first: the reader waits for the file to appear
  writeFileSync(`${process.env.SLOWTRACE}.part`, JSON.stringify({ requests, gcs, statements, upstream }))
  renameSync(`${process.env.SLOWTRACE}.part`, process.env.SLOWTRACE)
  requests.length = 0
  gcs.length = 0
  statements.length = 0
  upstream.length = 0
})
