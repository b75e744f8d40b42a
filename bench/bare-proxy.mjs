// The comparison proxies: a bare Fastify + @fastify/reply-from passthrough (KIND=reply-from) and
// a bare Fastify handler over an undici Pool (KIND=undici), both to UPSTREAM. Prints its port.
import Fastify from 'fastify'
import replyFrom from '@fastify/reply-from'
import { Pool } from 'undici'

const upstream = process.env.UPSTREAM
const app = Fastify({ logger: false })
if (process.env.KIND === 'undici') {
  const pool = new Pool(upstream, { connections: 128 })
  app.post('/*', async (request, reply) => {
    const res = await pool.request({ method: 'POST', path: request.url, headers: { 'content-type': 'application/json' }, body: JSON.stringify(request.body) })
    reply.status(res.statusCode).header('content-type', res.headers['content-type'])
    return reply.send(res.body)
  })
} else {
  await app.register(replyFrom, { base: upstream, undici: { connections: 128 } })
  app.post('/*', (request, reply) => reply.from(request.url))
}
await app.listen({ port: 0, host: '127.0.0.1' })
process.stdout.write(`listening ${app.server.address().port}\n`)
// a clean exit on SIGTERM, so that --cpu-prof (bench/profile.ts BASELINE=1) writes its profile
process.once('SIGTERM', () => { app.close().then(() => process.exit(0)) })
