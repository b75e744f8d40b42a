import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

// One operator's account at three providers, as their object APIs keep it: OpenAI's files,
// batches and chat completions (base `{url}/openai/v1`), Anthropic's files, message batches and
// messages (base `{url}/anthropic`), Gemini's files (resumable uploads included), cached contents and
// generateContent (base `{url}/gemini`). Every object is the account's, whoever made it, as at a
// real provider: the gateway is what keeps tenants apart. Ids are made in order, lists come in
// the order the objects were made, `requests` records every request that arrived.

interface Stored { id: string, kind: string, content: string, body: Record<string, unknown> }

export interface MockAccount {
  url: string
  requests: Array<{ method: string, url: string, headers: IncomingMessage['headers'] }>
  /** The objects kept, by id. */
  objects: Map<string, Stored>
  close: () => Promise<void>
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

async function read (req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

export async function startMockAccount (): Promise<MockAccount> {
  const objects = new Map<string, Stored>()
  const requests: MockAccount['requests'] = []
  const sessions = new Map<string, string>()
  let n = 0
  let base = ''
  const make = (kind: string, id: string, content: string, body: Record<string, unknown>): Stored => {
    const o = { id, kind, content, body }
    objects.set(id, o)
    return o
  }
  const of = (kind: string): Stored[] => [...objects.values()].filter((o) => o.kind === kind)
  /** A page of a list paged by ids: after `after` (or `after_id`), `limit` of them. */
  const page = (items: Stored[], q: URLSearchParams, limit: number): Record<string, unknown> => {
    const after = q.get('after') ?? q.get('after_id')
    const start = after === null ? 0 : items.findIndex((o) => o.id === after) + 1
    const size = Number(q.get('limit') ?? limit)
    const data = items.slice(start, start + size).map((o) => o.body)
    return { object: 'list', data, first_id: (data[0] as { id?: string } | undefined)?.id ?? null, last_id: (data.at(-1) as { id?: string } | undefined)?.id ?? null, has_more: start + size < items.length }
  }
  const notFound = (res: ServerResponse): void => { json(res, 404, { error: { message: 'No such object.', type: 'invalid_request_error' } }) }

  async function openai (req: IncomingMessage, res: ServerResponse, path: string, q: URLSearchParams): Promise<void> {
    const m = req.method
    const text = await read(req)
    let seg: RegExpExecArray | null
    if (m === 'POST' && path === '/files') {
      const id = `file-${++n}`
      json(res, 200, make('file', id, text, { id, object: 'file', bytes: text.length, purpose: 'batch' }).body)
    } else if (m === 'GET' && path === '/files') {
      json(res, 200, page(of('file'), q, 10_000))
    } else if ((seg = /^\/files\/([^/]+)(\/content)?$/.exec(path)) !== null) {
      const o = objects.get(seg[1] as string)
      if (o === undefined || o.kind !== 'file') { notFound(res); return }
      if (m === 'DELETE') { objects.delete(o.id); json(res, 200, { id: o.id, object: 'file', deleted: true }); return }
      if (seg[2] !== undefined) { res.writeHead(200, { 'content-type': 'application/octet-stream' }); res.end(o.content); return }
      json(res, 200, o.body)
    } else if (m === 'POST' && path === '/batches') {
      const id = `batch_${++n}`
      const input = (JSON.parse(text) as { input_file_id?: string }).input_file_id ?? null
      json(res, 200, make('batch', id, '', { id, object: 'batch', input_file_id: input, status: 'validating', output_file_id: null }).body)
    } else if (m === 'GET' && path === '/batches') {
      json(res, 200, page(of('batch'), q, 20))
    } else if ((seg = /^\/batches\/([^/]+)(\/cancel)?$/.exec(path)) !== null) {
      const o = objects.get(seg[1] as string)
      if (o === undefined || o.kind !== 'batch') { notFound(res); return }
      // the batch has run by the time it is looked at: its results are a file of the account
      if (o.body.output_file_id === null) {
        const out = `file-${++n}`
        make('file', out, `results of ${o.id}`, { id: out, object: 'file', bytes: 0, purpose: 'batch_output' })
        o.body = { ...o.body, status: seg[2] === undefined ? 'completed' : 'cancelled', output_file_id: out }
      }
      json(res, 200, o.body)
    } else if (m === 'POST' && path === '/chat/completions') {
      const body = JSON.parse(text) as { model: string }
      json(res, 200, { id: `chatcmpl-${++n}`, object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 } })
    } else if (m === 'GET' && path === '/models') {
      json(res, 200, { object: 'list', data: [] })
    } else {
      notFound(res)
    }
  }

  async function anthropic (req: IncomingMessage, res: ServerResponse, path: string, q: URLSearchParams): Promise<void> {
    const m = req.method
    const text = await read(req)
    let seg: RegExpExecArray | null
    if (m === 'POST' && path === '/v1/files') {
      const id = `file_${++n}`
      json(res, 200, make('a-file', id, text, { id, type: 'file', filename: 'upload', size_bytes: text.length }).body)
    } else if (m === 'GET' && path === '/v1/files') {
      const { object: _o, ...list } = page(of('a-file'), q, 20)
      json(res, 200, list)
    } else if ((seg = /^\/v1\/files\/([^/]+)(\/content)?$/.exec(path)) !== null) {
      const o = objects.get(seg[1] as string)
      if (o === undefined || o.kind !== 'a-file') { notFound(res); return }
      if (m === 'DELETE') { objects.delete(o.id); json(res, 200, { id: o.id, type: 'file_deleted' }); return }
      if (seg[2] !== undefined) { res.writeHead(200, { 'content-type': 'application/octet-stream' }); res.end(o.content); return }
      json(res, 200, o.body)
    } else if (m === 'POST' && path === '/v1/messages/batches') {
      const id = `msgbatch_${++n}`
      json(res, 200, make('msgbatch', id, `{"custom_id":"1","result":{"type":"succeeded"}}\n${text}`, { id, type: 'message_batch', processing_status: 'ended' }).body)
    } else if ((seg = /^\/v1\/messages\/batches\/([^/]+)(\/results)?$/.exec(path)) !== null) {
      const o = objects.get(seg[1] as string)
      if (o === undefined || o.kind !== 'msgbatch') { notFound(res); return }
      if (seg[2] !== undefined) { res.writeHead(200, { 'content-type': 'application/x-jsonl' }); res.end(o.content); return }
      json(res, 200, o.body)
    } else if (m === 'POST' && path === '/v1/messages') {
      const body = JSON.parse(text) as { model: string }
      json(res, 200, { id: `msg_${++n}`, type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: 'hello' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 10, output_tokens: 2 } })
    } else {
      notFound(res)
    }
  }

  async function gemini (req: IncomingMessage, res: ServerResponse, path: string, q: URLSearchParams): Promise<void> {
    const m = req.method
    const text = await read(req)
    let seg: RegExpExecArray | null
    if (m === 'POST' && path === '/upload/v1beta/files') {
      const command = String(req.headers['x-goog-upload-command'] ?? '')
      if (command === 'start') {
        const session = `s${++n}`
        sessions.set(session, '')
        res.writeHead(200, { 'x-goog-upload-url': `${base}/gemini/upload/v1beta/files?upload_id=${session}&upload_protocol=resumable`, 'x-goog-upload-status': 'active' })
        res.end()
        return
      }
      const session = q.get('upload_id') ?? ''
      if (!sessions.has(session)) { notFound(res); return }
      if (!command.includes('finalize')) { sessions.set(session, (sessions.get(session) ?? '') + text); res.writeHead(200, { 'x-goog-upload-status': 'active' }); res.end(); return }
      const content = (sessions.get(session) ?? '') + text
      sessions.delete(session)
      const name = `files/f${++n}`
      const file = { name, uri: `${base}/gemini/v1beta/${name}`, mimeType: 'text/plain', sizeBytes: String(content.length), state: 'ACTIVE' }
      make('g-file', name, content, file)
      json(res, 200, { file }, { 'x-goog-upload-status': 'final' })
    } else if (m === 'GET' && path === '/v1beta/files') {
      const all = of('g-file')
      const start = Number(q.get('pageToken') ?? 0)
      const size = Number(q.get('pageSize') ?? 10)
      const files = all.slice(start, start + size).map((o) => o.body)
      // Google leaves an empty list out
      json(res, 200, { ...(files.length > 0 ? { files } : {}), ...(start + size < all.length ? { nextPageToken: String(start + size) } : {}) })
    } else if ((seg = /^\/v1beta\/(files\/[^/:]+)(:download)?$/.exec(path)) !== null) {
      const o = objects.get(seg[1] as string)
      if (o === undefined) { notFound(res); return }
      if (m === 'DELETE') { objects.delete(o.id); json(res, 200, {}); return }
      if (seg[2] !== undefined) { res.writeHead(200, { 'content-type': 'text/plain' }); res.end(o.content); return }
      json(res, 200, o.body)
    } else if (m === 'POST' && path === '/v1beta/cachedContents') {
      const name = `cachedContents/c${++n}`
      json(res, 200, make('cache', name, text, { name, model: 'models/gemini-acct' }).body)
    } else if (m === 'POST' && /^\/v1beta\/models\/[^/]+:generateContent$/.test(path)) {
      json(res, 200, { candidates: [{ content: { role: 'model', parts: [{ text: 'hello' }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 2, totalTokenCount: 12 } })
    } else {
      notFound(res)
    }
  }

  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers })
    const u = new URL(req.url ?? '/', 'http://x')
    const [, ns = '', ...rest] = u.pathname.split('/')
    const path = `/${rest.join('/')}`
    const route = ns === 'openai' && path.startsWith('/v1/') ? openai(req, res, path.slice(3), u.searchParams) : ns === 'anthropic' ? anthropic(req, res, path, u.searchParams) : ns === 'gemini' ? gemini(req, res, path, u.searchParams) : undefined
    if (route === undefined) { notFound(res); return }
    route.catch((err: unknown) => { json(res, 500, { error: { message: String(err) } }) })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: base,
    requests,
    objects,
    close: async () => { server.closeAllConnections(); await new Promise<void>((resolve) => server.close(() => { resolve() })) }
  }
}
