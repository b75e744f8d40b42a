import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'

// A webhook receiver for the alerts' tests: it verifies every delivery's signature with the
// Standard Webhooks library (as an operator's receiver would) and keeps what it verified. It
// answers with `status()` (200 unless a test says otherwise; 0: it never answers, as a receiver
// that hangs).

export const WEBHOOK_SECRET = 'whsec_' + Buffer.from('modelgate-test-webhook-secret-32b').toString('base64')

export interface Received { id: string, type: string, data: Record<string, unknown>, created_at: string }

export interface Receiver {
  url: string
  /** Deliveries whose signature verified, in order of arrival. */
  received: Received[]
  /** Deliveries whose signature did not verify. */
  rejected: number
  /** Every request, verified or not (retries included). */
  hits: number
  status: () => number
  close: () => Promise<void>
}

export async function webhookReceiver (secret = WEBHOOK_SECRET, port = 0): Promise<Receiver> {
  const wh = new Webhook(secret)
  const r: Receiver = { url: '', received: [], rejected: 0, hits: 0, status: () => 200, close: async () => {} }
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      r.hits++
      const body = Buffer.concat(chunks).toString('utf8')
      const status = r.status()
      if (status === 0) return
      try {
        const event = wh.verify(body, req.headers as Record<string, string>) as Omit<Received, 'id'>
        if (status >= 200 && status < 300) r.received.push({ id: String(req.headers['webhook-id']), ...event })
      } catch {
        r.rejected++
        res.writeHead(400).end()
        return
      }
      res.writeHead(status).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/modelgate`
  r.close = async () => { server.closeAllConnections(); await new Promise<void>((resolve) => server.close(() => resolve())) }
  return r
}
