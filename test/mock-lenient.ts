import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

// A provider that routes as lenient servers do: it drops a fragment, decodes the path (twice),
// drops `;` parameters, merges slashes, trims trailing slashes and dots and ignores case; then it
// runs a chat completion (`…/chat/completions`) or a Gemini generateContent
// (`…/models/{m}:generateContent`), each reporting usage, and answers 404 to anything else.
// `served` records what it ran, for a test to hold the gateway's reading of the same target to.

export interface Served { route: 'chat' | 'gemini', model: string, target: string }

export interface LenientUpstream {
  url: string
  served: Served[]
  close: () => Promise<void>
}

/** The path a lenient router routes `target` by. */
export function lenientPath (target: string): string {
  let path = (target.split('#', 1)[0] as string).split('?', 1)[0] as string
  for (let i = 0; i < 2; i++) {
    try { path = decodeURIComponent(path) } catch {}
  }
  return `/${path.split('/').map((s) => (s.split(';', 1)[0] as string).replace(/\.+$/, '')).filter((s) => s !== '').join('/').toLowerCase()}`
}

export async function startLenientUpstream (): Promise<LenientUpstream> {
  const served: Served[] = []
  const server = createServer((req, res) => {
    let text = ''
    req.setEncoding('utf8')
    req.on('data', (d: string) => { text += d })
    req.on('end', () => {
      const path = lenientPath(req.url ?? '/')
      let body: { model?: unknown } = {}
      try { body = JSON.parse(text) as typeof body } catch {}
      const gemini = /\/models\/([^/:]+):generatecontent$/.exec(path)
      res.setHeader('content-type', 'application/json')
      if (req.method === 'POST' && path.endsWith('/chat/completions')) {
        const model = String(body.model)
        served.push({ route: 'chat', model, target: req.url ?? '' })
        res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } }))
      } else if (req.method === 'POST' && gemini !== null) {
        served.push({ route: 'gemini', model: gemini[1] as string, target: req.url ?? '' })
        res.end(JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{ text: 'hi' }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 } }))
      } else {
        res.statusCode = 404
        res.end(JSON.stringify({ error: { message: `no route ${path}` } }))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    close: async () => { server.closeAllConnections(); await new Promise<void>((resolve) => server.close(() => { resolve() })) }
  }
}
