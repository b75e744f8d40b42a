import t from 'tap'
import fastifyStatic from '@fastify/static'
import Fastify, { type FastifyInstance } from 'fastify'
import { fromRoot, shippedFiles } from '../../paths.js'
import { shippedPage } from '../../routes/console/shipped-page.js'

// The executable file serves the consoles' pages from memory (routes/console/shipped-page.ts),
// where an install serves them from disk with @fastify/static: the same folder served both ways
// answers the same, file by file.

const cacheHeaders = (res: { setHeader: (name: string, value: string) => unknown }, path: string): void => {
  res.setHeader('cache-control', path.endsWith('.html') ? 'no-cache' : 'public, max-age=31536000, immutable')
}

async function served (register: (app: FastifyInstance) => Promise<void>): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(async (scope) => { await register(scope) }, { prefix: '/console' })
  await app.ready()
  return app
}

t.test('a console page served from memory answers as @fastify/static serves it from disk', async (t) => {
  const files = shippedFiles('dist', 'console')
  t.ok(files.includes('index.html') && files.includes('admin/index.html'), 'both pages are built (npm test builds them)')
  const skip = (path: string): boolean => path.startsWith('admin/')
  const fromDisk = await served(async (app) => {
    await app.register(fastifyStatic, { root: fromRoot('dist', 'console'), prefix: '/', index: ['index.html'], wildcard: false, globIgnore: ['admin/**'], cacheControl: false, setHeaders: cacheHeaders })
  })
  const fromMemory = await served(async (app) => { await app.register(shippedPage, { folder: ['dist', 'console'], skip, setHeaders: cacheHeaders }) })
  t.teardown(async () => { await Promise.all([fromDisk.close(), fromMemory.close()]) })

  const urls = ['/console', '/console/', '/console/admin/index.html', '/console/missing.js', '/console/assets/', ...files.map((f) => `/console/${f}`)]
  for (const url of urls) {
    for (const method of ['GET', 'HEAD'] as const) {
      const [disk, memory] = await Promise.all([fromDisk.inject({ method, url }), fromMemory.inject({ method, url })])
      t.equal(memory.statusCode, disk.statusCode, `${method} ${url}: ${disk.statusCode}`)
      if (disk.statusCode !== 200) continue
      for (const h of ['content-type', 'cache-control', 'content-length']) t.equal(memory.headers[h], disk.headers[h], `${method} ${url}: ${h}`)
      t.equal(memory.body, disk.body, `${method} ${url}: the same bytes`)
    }
  }
})

t.test('a page served from memory has an ETag of its contents, and a browser that has them gets a 304', async (t) => {
  const app = await served(async (app) => { await app.register(shippedPage, { folder: ['dist', 'console'], skip: (p) => p.startsWith('admin/'), setHeaders: cacheHeaders }) })
  t.teardown(async () => { await app.close() })
  const first = await app.inject({ method: 'GET', url: '/console/' })
  const etag = String(first.headers.etag)
  t.match(etag, /^"[\w-]{27}"$/)
  t.equal((await app.inject({ method: 'GET', url: '/console/index.html' })).headers.etag, etag, 'the page at / and at index.html: one ETag')
  const again = await app.inject({ method: 'GET', url: '/console/', headers: { 'if-none-match': `W/${etag}` } })
  t.equal(again.statusCode, 304)
  t.equal(again.body, '')
  t.equal((await app.inject({ method: 'GET', url: '/console/', headers: { 'if-none-match': '"other"' } })).statusCode, 200, 'other contents: the page')
  const icon = await app.inject({ method: 'GET', url: '/console/favicon.svg' })
  t.not(icon.headers.etag, etag, 'each file its own')
})
