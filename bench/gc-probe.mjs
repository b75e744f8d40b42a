// Preloaded into the gateway by bench/memory.ts (with --expose-gc): on SIGUSR2, collect garbage
// and append the process's memory after the collection to $MEM_PROBE_OUT as one JSON line, so
// RSS is compared without the garbage V8 had not collected yet when it was read.
import { appendFileSync, readFileSync } from 'node:fs'

const mb = (bytes) => Math.round(bytes / 10485.76) / 100
process.on('SIGUSR2', () => {
  for (let i = 0; i < 3; i++) globalThis.gc()
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024
  const m = process.memoryUsage()
  appendFileSync(process.env.MEM_PROBE_OUT, JSON.stringify({ rss_mb: Math.round(rss * 100) / 100, heap_used_mb: mb(m.heapUsed), external_mb: mb(m.external) }) + '\n')
})
