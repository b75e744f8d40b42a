import { request } from 'node:http'

/** What the running gateway's admin API answered: its status, and its JSON body ({} when it sent none). */
export interface Answer { status: number, body: unknown }

/**
 * Calls the running gateway's admin API with the admin token, at `base` (where adminBaseOf says
 * it may be asked). Over node:http: Node's fetch takes a command longer to load than the call.
 */
export async function askGateway (base: string, method: 'GET' | 'POST', path: string, token: string): Promise<Answer> {
  return await new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { method, headers: { authorization: `Bearer ${token}`, 'content-length': 0 } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => { chunks.push(c) })
      res.on('error', reject)
      res.on('end', () => {
        let body: unknown = {}
        try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')) } catch {}
        resolve({ status: res.statusCode ?? 0, body })
      })
    })
    req.on('error', reject)
    req.end()
  })
}
