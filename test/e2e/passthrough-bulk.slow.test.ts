import t, { type Test } from 'tap'
import { createServer, request as httpRequest, type Server } from 'node:http'
import { readFileSync } from 'node:fs'
import { Readable } from 'node:stream'
import { KEY_A, spawnGateway } from '../helper.js'

// Pass-through of bodies far larger than memory: 200 MB each way through a gateway process of its
// own, whose resident set is read from /proc. (passthrough.test.ts: the rest of /passthrough.)
// Slow, so in `npm run test:slow`.

/** A provider that drains uploads (counting bytes) and serves downloads of any size, holding nothing. */
async function bulkUpstream (t: Test): Promise<{ server: Server, url: string, received: () => number }> {
  let received = 0
  const server = createServer((req, res) => {
    if (req.method === 'POST') {
      req.on('data', (c: Buffer) => { received += c.length })
      req.on('end', () => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ id: 'file-1', bytes: received })) })
      return
    }
    const size = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('bytes') ?? 0)
    res.setHeader('content-type', 'application/octet-stream')
    res.setHeader('content-length', String(size))
    const chunk = Buffer.alloc(64 * 1024, 120)
    let sent = 0
    const pump = (): void => {
      while (sent < size) {
        const n = Math.min(chunk.length, size - sent)
        sent += n
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) { res.once('drain', pump); return }
      }
      res.end()
    }
    pump()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`, received: () => received }
}

/** The resident set of a process and its peak so far, in MB (Linux /proc). */
function memoryOf (pid: number): { rss: number, peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 }
}

async function upload (url: string, size: number): Promise<{ status: number, text: string }> {
  // generated chunk by chunk, never held whole by the test either
  const chunk = Buffer.alloc(256 * 1024, 97)
  let produced = 0
  const source = new Readable({
    read () {
      if (produced >= size) { this.push(null); return }
      const n = Math.min(chunk.length, size - produced)
      produced += n
      this.push(n === chunk.length ? chunk : chunk.subarray(0, n))
    }
  })
  return await new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/octet-stream', 'content-length': String(size) } }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => { text += String(d) })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, text }) })
    })
    req.on('error', reject)
    source.pipe(req)
  })
}

async function download (url: string): Promise<{ status: number, bytes: number }> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${KEY_A}` } })
  let bytes = 0
  for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) bytes += c.length
  return { status: res.status, bytes }
}

// Flat memory: nothing is held in proportion to the body. The figure read is the gateway's peak
// resident set, which also holds the garbage of the transfer's socket buffers until V8 collects
// it (Buffers count as external memory, collected after some 32-64 MB), so the bound checked is
// far below the transfer size rather than near zero; the test prints the figures.
t.test('a 200 MB upload and a 200 MB download pass with flat memory', async (t) => {
  const bulk = await bulkUpstream(t)
  // the gateway in a process of its own, so that its memory is its own
  const gw = await spawnGateway(t, {
    server: { body_limit_mb: 256 },
    store: { sqlite: ':memory:' },
    admin: { token: 'bulk-admin-token-0123456789' },
    providers: [{ id: 'bulk', protocol: 'openai', base_url: bulk.url, api_key: 'sk-bulk', passthrough: true }],
    models: [],
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['bulk'] }] }] }]
  }, ['--workers', '1'])
  const base = `http://127.0.0.1:${gw.port}/passthrough/bulk`
  const MB = Number(process.env.PT_MB ?? 200)
  const SIZE = MB * 1024 * 1024
  // warm up: pools, buffers and code paths in place before the baseline
  t.equal((await upload(`${base}/files`, 1024 * 1024)).status, 200)
  t.equal((await download(`${base}/files/file-1/content?bytes=${1024 * 1024}`)).bytes, 1024 * 1024)
  const before = memoryOf(gw.pid)

  const up = await upload(`${base}/files`, SIZE)
  t.equal(up.status, 200)
  t.equal(JSON.parse(up.text).bytes - 1024 * 1024, SIZE, 'every byte reached the provider')
  const mid = memoryOf(gw.pid)
  t.comment(`after the upload: peak ${mid.peak.toFixed(1)} MB, now ${mid.rss.toFixed(1)} MB`)
  const down = await download(`${base}/files/file-1/content?bytes=${SIZE}`)
  t.equal(down.status, 200)
  t.equal(down.bytes, SIZE, 'the whole download arrived')
  const after = memoryOf(gw.pid)
  const tooBig = await upload(`${base}/files`, 257 * 1024 * 1024).catch(() => ({ status: 413, text: '' }))
  t.equal(tooBig.status, 413, 'an upload over the body limit is refused')
  const growth = after.peak - Math.max(before.peak, before.rss)
  t.comment(`gateway RSS ${before.rss.toFixed(1)} MB before, peak ${after.peak.toFixed(1)} MB over a ${MB} MB upload and a ${MB} MB download: +${growth.toFixed(1)} MB`)
  t.ok(growth < MB / 2, `peak RSS grew ${growth.toFixed(1)} MB, far below the ${MB} MB passed each way`)
  const usage = await fetch(`http://127.0.0.1:${gw.port}/admin/v1/usage`, { headers: { authorization: 'Bearer bulk-admin-token-0123456789' } })
  const rows = (await usage.json() as { data: Array<Record<string, unknown>> }).data
  t.ok(rows.length >= 4, 'each call recorded')
  t.match(rows[0], { endpoint: 'passthrough', provider: 'bulk', prompt_tokens: 0, cost_usd: '0' })
})
