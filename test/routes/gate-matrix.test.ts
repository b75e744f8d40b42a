import t from 'tap'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../app.js'
import type { Config } from '../../config/schema.js'
import { budgetScope, quotaWindow } from '../../engine/gateway/quota-windows.js'
import { openStore } from '../../engine/store/index.js'
import type { Store } from '../../engine/store/types.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { mockMcpHttp, type MockMcpHttp } from '../mock-mcp.js'
import { FakeClock, mockCatalogWithGemini, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// One gate for every route that spends: every route of the API, called by a key in every state,
// with the status each cell must have. A cell is `ok` when the gate admitted the call and the
// provider was reached; a number is the gateway's own answer, and then nothing reached the
// provider. The key states that must survive the store being re-read (a revocation, a deletion)
// are set up before a reload and a restart of the gateway on the same SQLite file.
//
// The table is complete by construction: every route the API scope registers is either a row
// here (metered routes, each method) or listed in SPENDS_NOTHING with what it answers, which is
// checked too; a route added later without a row fails this test by itself.
//
// Every refused cell is checked in the usage records too: a key known, the refusal is a record of
// that key (`refused`, its error's code, nothing spent); a 401 leaves none.

const K = {
  valid: 'mg-gate-valid-0123456789abcdef',
  ungranted: 'mg-gate-ungranted-0123456789ab',
  nopass: 'mg-gate-nopass-0123456789abcdef',
  expired: 'mg-gate-expired-0123456789abcde',
  rpm: 'mg-gate-rpm-0123456789abcdefgh',
  budget: 'mg-gate-budget-0123456789abcdef',
  broke: 'mg-gate-broke-0123456789abcdefg',
  orgGone: 'mg-gate-org-gone-0123456789abcd',
  projectGone: 'mg-gate-project-gone-0123456789',
  revokedReload: 'mg-gate-revoked-reload-012345678',
  revokedRestart: 'mg-gate-revoked-restart-01234567',
  small: 'mg-gate-small-balance-0123456789',
  aliasOnly: 'mg-gate-alias-only-0123456789ab'
}
const ALL_PROVIDERS = ['mock-openai', 'mock-messages', 'mock-gemini']

const STATES = ['valid', 'ungranted', 'empty grants', 'no passthrough', 'revoked', 'revoked, reloaded', 'revoked, restarted', 'expired', 'rotated past grace', 'over rpm', 'over budget', 'balance 0', 'balance $1', 'org deleted', 'project deleted', 'alias only'] as const
type State = typeof STATES[number]

type Cell = 'ok' | number
type Kind = 'priced' | 'alias' | 'hold' | 'pt-hold' | 'tool-unpriced' | 'pt-tool-unpriced' | 'count' | 'listing' | 'tool-list' | 'foreign' | 'pt-priced' | 'pt-count' | 'pt-read' | 'pt-unmetered' | 'pt-unmetered-model' | 'pt-target' | 'pt-unattributable' | 'pt-foreign'

/** What each kind of route answers a key in each state. */
function expected (kind: Kind, state: State): Cell {
  // a key granted an alias alone: its calls through the alias go (the alias grants its targets for
  // them), and nothing else does: every other route answers it as a key granted nothing
  if (state === 'alias only') return kind === 'alias' ? expected('priced', 'valid') : expected(kind, 'ungranted')
  // a call through an alias is gated as any priced call to a model the key is granted
  if (kind === 'alias') return expected('priced', state)
  // a call whose worst case is more than $1 (and less than the $100 of the valid key's organization): as any priced call, but refused on $1
  if (kind === 'hold' || kind === 'pt-hold') return state === 'balance $1' ? 402 : expected(kind === 'hold' ? 'priced' : 'pt-priced', state)
  // a server tool the model has no price for: refused once the key may call the model, before its limits are looked at
  if (kind === 'tool-unpriced' || kind === 'pt-tool-unpriced') {
    const first = expected(kind === 'tool-unpriced' ? 'priced' : 'pt-priced', state)
    return first === 401 || first === 404 || first === 403 ? first : 400
  }
  if (state === 'balance $1') return expected(kind, 'valid')
  const passthrough = kind.startsWith('pt-')
  const spends = kind === 'priced' || kind === 'pt-priced'
  const unmetered = kind === 'pt-unmetered' || kind === 'pt-unmetered-model'
  // an MCP tools/list: any key that authenticates sees the tools its grants name (none, for some)
  if (kind === 'tool-list') return ['revoked', 'revoked, reloaded', 'revoked, restarted', 'expired', 'rotated past grace', 'org deleted', 'project deleted'].includes(state) ? 401 : 200
  switch (state) {
    case 'revoked': case 'revoked, reloaded': case 'revoked, restarted': case 'expired': case 'rotated past grace': case 'org deleted': case 'project deleted':
      return 401
  }
  // a target the provider could route otherwise than the gateway reads it: refused before anything else is looked at
  if (kind === 'pt-target') return 400
  // an endpoint whose objects the gateway cannot attribute, or an object the key's organization did not make: refused whatever the key's limits
  if (kind === 'pt-unattributable') return 403
  if (kind === 'pt-foreign') return state === 'no passthrough' ? 403 : 404
  // a /v1 call naming another organization's object: refused before the key's limits are looked at (a key granted no model: 404 too)
  if (kind === 'foreign') return 404
  switch (state) {
    case 'no passthrough':
      return passthrough ? 403 : kind === 'listing' ? 200 : 'ok'
    case 'ungranted': case 'empty grants':
      // a pass-through call that names no model needs no model grant (an unmetered one is refused anyway)
      return kind === 'pt-read' ? 'ok' : kind === 'pt-unmetered' ? 403 : 404
    case 'over rpm':
      return kind === 'listing' ? 200 : 429
    case 'over budget':
      return spends ? 429 : unmetered ? 403 : kind === 'listing' ? 200 : 'ok'
    case 'balance 0':
      return spends ? 402 : unmetered ? 403 : kind === 'listing' ? 200 : 'ok'
    case 'valid':
      return kind === 'listing' ? 200 : unmetered ? 403 : 'ok'
  }
}

interface Row {
  name: string
  kind: Kind
  /** The route as registered, and the methods of it this row stands for. */
  route: string
  covers: string[]
  call: (app: FastifyInstance, key: string) => Promise<LightMyRequestResponse>
}

const chat = { model: 'openai/gpt-test', max_tokens: 16, messages: [{ role: 'user', content: 'hello there' }] }
const gemini = { contents: [{ role: 'user', parts: [{ text: 'hello there' }] }], generationConfig: { maxOutputTokens: 16 } }
/** A model that takes max_completion_tokens, n and web_search_options. */
const wide = { ...chat, model: 'openai/gpt-wide' }
const textDocument = { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'word '.repeat(21_600) } }
const pdfDocument = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' } }
const webSearch = { type: 'web_search_20250305', name: 'web_search', max_uses: 100 }
/** Content naming an object another organization made at the provider. */
const theirFile = [{ role: 'user', content: [{ type: 'text', text: 'hello there' }, { type: 'file', file: { file_id: 'file-other-org' } }] }]
const theirDocument = [{ role: 'user', content: [{ type: 'text', text: 'hello there' }, { type: 'document', source: { type: 'file', file_id: 'file_other_org' } }] }]
const theirGeminiFile = { fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/other-org', mimeType: 'image/png' } }
const theirContents = [{ role: 'user', parts: [{ text: 'hello there' }, theirGeminiFile] }]
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
const json = (key: string): Record<string, string> => ({ ...bearer(key), 'content-type': 'application/json' })
const post = (url: string, body: unknown) => async (app: FastifyInstance, key: string) => await app.inject({ method: 'POST', url, headers: json(key), payload: JSON.stringify(body) })
/** A JSON-RPC request to the MCP endpoint, as a Streamable HTTP client sends it (no session: the gateway keeps none). */
const rpc = (url: string, method: string, params: unknown) => async (app: FastifyInstance, key: string) =>
  await app.inject({ method: 'POST', url, headers: { ...json(key), accept: 'application/json, text/event-stream' }, payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })
const get = (url: string) => async (app: FastifyInstance, key: string) => await app.inject({ method: 'GET', url, headers: bearer(key) })
/**
 * A request target sent as it is on a socket: inject (and fetch) would parse it as a URL first,
 * dropping a fragment. The app listens for these rows.
 */
const raw = (method: string, target: string, body?: unknown) => async (app: FastifyInstance, key: string): Promise<LightMyRequestResponse> => {
  const { port } = app.server.address() as { port: number }
  return await new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path: target, headers: body === undefined ? bearer(key) : json(key) }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => { text += d })
      res.on('end', () => { resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: text } as unknown as LightMyRequestResponse) })
    })
    req.on('error', reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
}

const ROWS: Row[] = [
  { name: 'POST /v1/chat/completions', kind: 'priced', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', chat) },
  { name: 'POST /v1/chat/completions (stream)', kind: 'priced', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...chat, stream: true }) },
  { name: 'POST /v1/messages', kind: 'priced', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-test' }) },
  { name: 'POST /v1/messages/count_tokens', kind: 'count', route: '/v1/messages/count_tokens', covers: ['POST'], call: post('/v1/messages/count_tokens', { model: 'anthropic/claude-test', messages: chat.messages }) },
  { name: 'POST /v1/responses', kind: 'priced', route: '/v1/responses', covers: ['POST'], call: post('/v1/responses', { model: 'openai/gpt-test', input: 'hello there', max_output_tokens: 16 }) },
  { name: 'POST /v1beta/…:generateContent', kind: 'priced', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:generateContent', gemini) },
  { name: 'POST /v1beta/…:streamGenerateContent', kind: 'priced', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:streamGenerateContent?alt=sse', gemini) },
  { name: 'POST /v1beta/…:countTokens', kind: 'count', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:countTokens', { contents: gemini.contents }) },
  { name: 'POST /v1/models/…:generateContent', kind: 'priced', route: '/v1/models/*', covers: ['POST'], call: post('/v1/models/anthropic/claude-test:generateContent', gemini) },
  // through an alias of openai/gpt-test and anthropic/claude-test, on each protocol
  { name: 'POST /v1/chat/completions, an alias', kind: 'alias', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...chat, model: 'team/smart' }) },
  { name: 'POST /v1/chat/completions (stream), an alias', kind: 'alias', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...chat, model: 'team/smart', stream: true }) },
  { name: 'POST /v1/messages, an alias', kind: 'alias', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'team/smart' }) },
  { name: 'POST /v1/responses, an alias', kind: 'alias', route: '/v1/responses', covers: ['POST'], call: post('/v1/responses', { model: 'team/smart', input: 'hello there', max_output_tokens: 16 }) },
  { name: 'POST /v1beta/…:generateContent, an alias', kind: 'alias', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/team/smart:generateContent', gemini) },
  { name: 'POST /v1/embeddings', kind: 'priced', route: '/v1/embeddings', covers: ['POST'], call: post('/v1/embeddings', { model: 'openai/embed-test', input: ['hello there'] }) },
  { name: 'POST /v1/embeddings (a Gemini provider)', kind: 'priced', route: '/v1/embeddings', covers: ['POST'], call: post('/v1/embeddings', { model: 'google/embed-test', input: 'hello there' }) },
  { name: 'POST /v1/images/generations', kind: 'priced', route: '/v1/images/generations', covers: ['POST'], call: post('/v1/images/generations', { model: 'openai/image-test', prompt: 'a lighthouse' }) },
  { name: 'POST /v1beta/…:embedContent', kind: 'priced', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/embed-test:embedContent', { content: { parts: [{ text: 'hello there' }] } }) },
  { name: 'POST /v1beta/…:batchEmbedContents', kind: 'priced', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/embed-test:batchEmbedContents', { requests: [{ model: 'models/google/embed-test', content: { parts: [{ text: 'hello there' }] } }] }) },
  // another organization's object, named on every /v1 route
  { name: 'POST /v1/chat/completions, another organization\'s file', kind: 'foreign', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...chat, messages: theirFile }) },
  { name: 'POST /v1/chat/completions (stream), another organization\'s file', kind: 'foreign', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...chat, messages: theirFile, stream: true }) },
  { name: 'POST /v1/messages, another organization\'s file', kind: 'foreign', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-test', messages: theirDocument }) },
  { name: 'POST /v1/messages (stream), another organization\'s file', kind: 'foreign', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-test', messages: theirDocument, stream: true }) },
  { name: 'POST /v1/messages/count_tokens, another organization\'s file', kind: 'foreign', route: '/v1/messages/count_tokens', covers: ['POST'], call: post('/v1/messages/count_tokens', { model: 'anthropic/claude-test', messages: theirDocument }) },
  { name: 'POST /v1/responses, another organization\'s file', kind: 'foreign', route: '/v1/responses', covers: ['POST'], call: post('/v1/responses', { model: 'openai/gpt-test', max_output_tokens: 16, input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello there' }, { type: 'input_file', file_id: 'file-other-org' }] }] }) },
  { name: 'POST /v1beta/…:generateContent, another organization\'s file', kind: 'foreign', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:generateContent', { ...gemini, contents: theirContents }) },
  { name: 'POST /v1beta/…:streamGenerateContent, another organization\'s file', kind: 'foreign', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:streamGenerateContent?alt=sse', { ...gemini, contents: theirContents }) },
  { name: 'POST /v1beta/…:countTokens, another organization\'s file', kind: 'foreign', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:countTokens', { contents: theirContents }) },
  { name: 'POST /v1beta/…:generateContent, another organization\'s cached content', kind: 'foreign', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:generateContent', { ...gemini, cachedContent: 'cachedContents/other-org' }) },
  { name: 'POST /v1/models/…:generateContent, another organization\'s cached content', kind: 'foreign', route: '/v1/models/*', covers: ['POST'], call: post('/v1/models/google/gemini-test:generateContent', { ...gemini, cachedContent: 'cachedContents/other-org' }) },
  { name: 'POST /v1/embeddings, a field naming another organization\'s file', kind: 'foreign', route: '/v1/embeddings', covers: ['POST'], call: post('/v1/embeddings', { model: 'openai/embed-test', input: ['hello there'], extra: { file_id: 'file-other-org' } }) },
  { name: 'POST /v1/images/generations, a field naming another organization\'s file', kind: 'foreign', route: '/v1/images/generations', covers: ['POST'], call: post('/v1/images/generations', { model: 'openai/image-test', prompt: 'a lighthouse', reference: { file_id: 'file-other-org' } }) },
  { name: 'POST /v1beta/…:embedContent, another organization\'s file', kind: 'foreign', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/embed-test:embedContent', { content: { parts: [{ text: 'hello there' }, theirGeminiFile] } }) },
  { name: 'POST /v1beta/…:batchEmbedContents, another organization\'s file', kind: 'foreign', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/embed-test:batchEmbedContents', { requests: [{ model: 'models/google/embed-test', content: { parts: [theirGeminiFile] } }] }) },
  // holds: the most the upstream may bill for the body it is sent (each over $1, under $100)
  { name: 'POST /v1/chat/completions, max_completion_tokens over max_tokens', kind: 'hold', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...wide, max_tokens: 1, max_completion_tokens: 100_000 }) },
  { name: 'POST /v1/chat/completions (stream), max_completion_tokens over max_tokens', kind: 'hold', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...wide, max_tokens: 1, max_completion_tokens: 100_000, stream: true }) },
  { name: 'POST /v1/chat/completions, n: 128', kind: 'hold', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...wide, max_tokens: 1000, n: 128 }) },
  { name: 'POST /v1/chat/completions, CJK text', kind: 'hold', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...wide, messages: [{ role: 'user', content: '鬱'.repeat(60_000) }] }) },
  { name: 'POST /v1/messages, a plain-text document', kind: 'hold', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-test', messages: [{ role: 'user', content: [textDocument] }] }) },
  { name: 'POST /v1/messages (stream), a PDF', kind: 'hold', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-test', stream: true, messages: [{ role: 'user', content: [pdfDocument] }] }) },
  { name: 'POST /v1/messages, priced web searches', kind: 'hold', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-search', tools: [{ ...webSearch, max_uses: 200 }] }) },
  { name: 'POST /v1/responses, a file by its data', kind: 'hold', route: '/v1/responses', covers: ['POST'], call: post('/v1/responses', { model: 'openai/gpt-test', max_output_tokens: 16, input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello there' }, { type: 'input_file', filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0xLjQK' }] }] }) },
  { name: 'POST /v1beta/…:generateContent, candidateCount 8', kind: 'hold', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-wide:generateContent', { ...gemini, generationConfig: { maxOutputTokens: 10_000, candidateCount: 8 } }) },
  { name: 'POST /v1beta/…:streamGenerateContent, inline PDF', kind: 'hold', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:streamGenerateContent?alt=sse', { ...gemini, contents: [{ role: 'user', parts: [{ text: 'hello there' }, { inlineData: { mimeType: 'application/pdf', data: 'JVBERi0xLjQK' } }] }] }) },
  { name: 'POST /v1/models/…:generateContent, inline PDF to Messages', kind: 'hold', route: '/v1/models/*', covers: ['POST'], call: post('/v1/models/anthropic/claude-test:generateContent', { ...gemini, contents: [{ role: 'user', parts: [{ text: 'hello there' }, { inlineData: { mimeType: 'application/pdf', data: 'JVBERi0xLjQK' } }] }] }) },
  { name: 'POST /passthrough/openai chat, n: 128', kind: 'pt-hold', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/chat/completions', { ...chat, model: 'gpt-upstream-name', max_tokens: 1000, n: 128 }) },
  { name: 'POST /passthrough/openai chat, max_completion_tokens over max_tokens', kind: 'pt-hold', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/chat/completions', { ...chat, model: 'gpt-upstream-name', max_tokens: 1, max_completion_tokens: 100_000 }) },
  { name: 'POST /passthrough/anthropic messages, a plain-text document', kind: 'pt-hold', route: '/passthrough/mock-messages/*', covers: ['POST'], call: post('/passthrough/mock-messages/v1/messages', { ...chat, model: 'claude-upstream-name', messages: [{ role: 'user', content: [textDocument] }] }) },
  { name: 'POST /passthrough/gemini generateContent, candidateCount 8', kind: 'pt-hold', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: post('/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:generateContent', { ...gemini, generationConfig: { maxOutputTokens: 10_000, candidateCount: 8 } }) },
  // server tools the model has no per-use price for
  { name: 'POST /v1/messages, web_search unpriced', kind: 'tool-unpriced', route: '/v1/messages', covers: ['POST'], call: post('/v1/messages', { ...chat, model: 'anthropic/claude-test', tools: [webSearch] }) },
  { name: 'POST /v1/chat/completions, web_search_options unpriced', kind: 'tool-unpriced', route: '/v1/chat/completions', covers: ['POST'], call: post('/v1/chat/completions', { ...wide, web_search_options: {} }) },
  { name: 'POST /v1/responses, web_search unpriced', kind: 'tool-unpriced', route: '/v1/responses', covers: ['POST'], call: post('/v1/responses', { model: 'openai/gpt-test', input: 'hello there', max_output_tokens: 16, tools: [{ type: 'web_search' }] }) },
  { name: 'POST /v1beta/…:generateContent, googleSearch unpriced', kind: 'tool-unpriced', route: '/v1beta/models/*', covers: ['POST'], call: post('/v1beta/models/google/gemini-test:generateContent', { ...gemini, tools: [{ googleSearch: {} }] }) },
  { name: 'POST /passthrough/anthropic messages, web_search unpriced', kind: 'pt-tool-unpriced', route: '/passthrough/mock-messages/*', covers: ['POST'], call: post('/passthrough/mock-messages/v1/messages', { ...chat, model: 'claude-upstream-name', tools: [webSearch] }) },
  { name: 'POST /passthrough/gemini generateContent, googleSearch unpriced', kind: 'pt-tool-unpriced', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: post('/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:generateContent', { ...gemini, tools: [{ googleSearch: {} }] }) },
  { name: 'GET /v1/models/{id}', kind: 'listing', route: '/v1/models/*', covers: ['GET', 'HEAD'], call: get('/v1/models/openai/gpt-test') },
  { name: 'GET /v1beta/models/{id}', kind: 'listing', route: '/v1beta/models/*', covers: ['GET', 'HEAD'], call: get('/v1beta/models/google/gemini-test') },
  { name: 'POST /mcp tools/call', kind: 'priced', route: '/mcp', covers: ['POST'], call: rpc('/mcp', 'tools/call', { name: 'docs__echo', arguments: { text: 'hello there' } }) },
  { name: 'POST /mcp/{server} tools/call', kind: 'priced', route: '/mcp/:server', covers: ['POST'], call: rpc('/mcp/docs', 'tools/call', { name: 'echo', arguments: { text: 'hello there' } }) },
  { name: 'POST /mcp tools/list', kind: 'tool-list', route: '/mcp', covers: ['POST'], call: rpc('/mcp', 'tools/list', {}) },
  { name: 'POST /passthrough/openai chat', kind: 'pt-priced', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/chat/completions', { ...chat, model: 'gpt-upstream-name' }) },
  { name: 'POST /passthrough/openai chat, a dated snapshot', kind: 'pt-priced', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/chat/completions', { ...chat, model: 'gpt-upstream-name-2025-01-01' }) },
  { name: 'POST /passthrough/openai embeddings', kind: 'pt-priced', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/embeddings', { model: 'text-embedding-up', input: 'hello there' }) },
  { name: 'POST /passthrough/openai images', kind: 'pt-unmetered-model', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/images/generations', { model: 'gpt-image-up', prompt: 'a lighthouse' }) },
  { name: 'POST /passthrough/anthropic messages', kind: 'pt-priced', route: '/passthrough/mock-messages/*', covers: ['POST'], call: post('/passthrough/mock-messages/v1/messages', { ...chat, model: 'claude-upstream-name' }) },
  { name: 'POST /passthrough/anthropic count_tokens', kind: 'pt-count', route: '/passthrough/mock-messages/*', covers: ['POST'], call: post('/passthrough/mock-messages/v1/messages/count_tokens', { model: 'claude-upstream-name', messages: chat.messages }) },
  { name: 'POST /passthrough/gemini generateContent', kind: 'pt-priced', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: post('/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:generateContent', gemini) },
  { name: 'GET /passthrough/openai models', kind: 'pt-read', route: '/passthrough/mock-openai/*', covers: ['GET', 'HEAD', 'OPTIONS', 'DELETE'], call: get('/passthrough/mock-openai/models') },
  { name: 'GET /passthrough/openai', kind: 'pt-unattributable', route: '/passthrough/mock-openai', covers: ['GET', 'HEAD', 'OPTIONS', 'DELETE'], call: get('/passthrough/mock-openai') },
  { name: 'GET /passthrough/anthropic models', kind: 'pt-read', route: '/passthrough/mock-messages/*', covers: ['GET', 'HEAD', 'OPTIONS', 'DELETE'], call: get('/passthrough/mock-messages/v1/models') },
  { name: 'GET /passthrough/anthropic', kind: 'pt-unattributable', route: '/passthrough/mock-messages', covers: ['GET', 'HEAD', 'OPTIONS', 'DELETE'], call: get('/passthrough/mock-messages') },
  { name: 'GET /passthrough/gemini models', kind: 'pt-read', route: '/passthrough/mock-gemini/*', covers: ['GET', 'HEAD', 'OPTIONS', 'DELETE'], call: get('/passthrough/mock-gemini/v1beta/models') },
  { name: 'GET /passthrough/gemini', kind: 'pt-unattributable', route: '/passthrough/mock-gemini', covers: ['GET', 'HEAD', 'OPTIONS', 'DELETE'], call: get('/passthrough/mock-gemini') },
  { name: 'POST /passthrough/openai batches', kind: 'pt-unmetered', route: '/passthrough/mock-openai/*', covers: ['POST', 'PUT', 'PATCH'], call: post('/passthrough/mock-openai/batches', { endpoint: '/v1/chat/completions', completion_window: '24h' }) },
  { name: 'POST /passthrough/openai batches, another organization\'s file', kind: 'pt-foreign', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/batches', { input_file_id: 'file-other-org', endpoint: '/v1/chat/completions', completion_window: '24h' }) },
  { name: 'GET /passthrough/openai another organization\'s file', kind: 'pt-foreign', route: '/passthrough/mock-openai/*', covers: ['GET'], call: get('/passthrough/mock-openai/files/file-other-org/content') },
  { name: 'POST /passthrough/openai chat, another organization\'s file', kind: 'pt-foreign', route: '/passthrough/mock-openai/*', covers: ['POST'], call: post('/passthrough/mock-openai/chat/completions', { ...chat, model: 'gpt-upstream-name', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-other-org' } }] }] }) },
  { name: 'GET /passthrough/anthropic another organization\'s batch', kind: 'pt-foreign', route: '/passthrough/mock-messages/*', covers: ['GET'], call: get('/passthrough/mock-messages/v1/messages/batches/msgbatch_other/results') },
  { name: 'GET /passthrough/gemini another organization\'s file', kind: 'pt-foreign', route: '/passthrough/mock-gemini/*', covers: ['GET'], call: get('/passthrough/mock-gemini/v1beta/files/other-org:download') },
  { name: 'GET /passthrough/openai assistants', kind: 'pt-unattributable', route: '/passthrough/mock-openai/*', covers: ['GET'], call: get('/passthrough/mock-openai/assistants') },
  { name: 'GET /passthrough/openai stored completions', kind: 'pt-unattributable', route: '/passthrough/mock-openai/*', covers: ['GET'], call: get('/passthrough/mock-openai/chat/completions') },
  // a path that names a model needs it granted, whatever the endpoint costs
  { name: 'GET /passthrough/openai a model', kind: 'pt-count', route: '/passthrough/mock-openai/*', covers: ['GET'], call: get('/passthrough/mock-openai/models/gpt-upstream-name') },
  { name: 'GET /passthrough/gemini a model', kind: 'pt-count', route: '/passthrough/mock-gemini/*', covers: ['GET'], call: get('/passthrough/mock-gemini/v1beta/models/gemini-upstream-name') },
  { name: 'POST /passthrough/gemini countTokens', kind: 'pt-count', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: post('/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:countTokens', { contents: gemini.contents }) },
  // request targets a provider would route otherwise than they read: a fragment, an escape (a letter, a colon), on metered, free and Gemini-method paths
  { name: 'POST /passthrough/openai chat#/files', kind: 'pt-target', route: '/passthrough/mock-openai/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-openai/chat/completions#/files', { ...chat, model: 'gpt-upstream-name' }) },
  { name: 'POST /passthrough/openai %63hat', kind: 'pt-target', route: '/passthrough/mock-openai/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-openai/%63hat/completions', { ...chat, model: 'gpt-upstream-name' }) },
  { name: 'POST /passthrough/anthropic messages#/cancel', kind: 'pt-target', route: '/passthrough/mock-messages/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-messages/v1/messages#/cancel', { ...chat, model: 'claude-upstream-name' }) },
  { name: 'GET /passthrough/openai models#x', kind: 'pt-target', route: '/passthrough/mock-openai/*', covers: ['GET'], call: raw('GET', '/passthrough/mock-openai/models#x') },
  { name: 'GET /passthrough/openai m%6fdels', kind: 'pt-target', route: '/passthrough/mock-openai/*', covers: ['GET'], call: raw('GET', '/passthrough/mock-openai/m%6fdels') },
  { name: 'POST /passthrough/anthropic c%6funt_tokens', kind: 'pt-target', route: '/passthrough/mock-messages/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-messages/v1/messages/c%6funt_tokens', { model: 'claude-upstream-name', messages: chat.messages }) },
  { name: 'POST /passthrough/gemini …%3AgenerateContent', kind: 'pt-target', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-gemini/v1beta/models/gemini-upstream-name%3AgenerateContent', gemini) },
  { name: 'POST /passthrough/gemini …n%61me:generateContent', kind: 'pt-target', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-gemini/v1beta/models/gemini-upstream-n%61me:generateContent', gemini) },
  { name: 'POST /passthrough/gemini …:generateContent#/files', kind: 'pt-target', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:generateContent#/files', gemini) },
  { name: 'POST /passthrough/gemini another model:generateContent#/files', kind: 'pt-target', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-gemini/v1beta/models/other-model:generateContent#/files', gemini) },
  { name: 'POST /passthrough/gemini …%3AcountTokens', kind: 'pt-target', route: '/passthrough/mock-gemini/*', covers: ['POST'], call: raw('POST', '/passthrough/mock-gemini/v1beta/models/gemini-upstream-name%3AcountTokens', { contents: gemini.contents }) },
  { name: 'POST /passthrough/openai', kind: 'pt-unattributable', route: '/passthrough/mock-openai', covers: ['POST', 'PUT', 'PATCH'], call: post('/passthrough/mock-openai', {}) },
  { name: 'POST /passthrough/anthropic batches', kind: 'pt-unmetered', route: '/passthrough/mock-messages/*', covers: ['POST', 'PUT', 'PATCH'], call: post('/passthrough/mock-messages/v1/messages/batches', { requests: [] }) },
  { name: 'POST /passthrough/anthropic', kind: 'pt-unattributable', route: '/passthrough/mock-messages', covers: ['POST', 'PUT', 'PATCH'], call: post('/passthrough/mock-messages', {}) },
  { name: 'POST /passthrough/gemini predict', kind: 'pt-unmetered-model', route: '/passthrough/mock-gemini/*', covers: ['POST', 'PUT', 'PATCH'], call: post('/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:predictLongRunning', { instances: [] }) },
  { name: 'POST /passthrough/gemini', kind: 'pt-unattributable', route: '/passthrough/mock-gemini', covers: ['POST', 'PUT', 'PATCH'], call: post('/passthrough/mock-gemini', {}) }
]

/**
 * The API scope's routes that spend nothing, with what they answer the valid key without reaching
 * a provider. Each claim is checked: a route that starts to spend must move to ROWS.
 */
const SPENDS_NOTHING: Array<{ route: string, method: string, url: string, status: number }> = [
  { route: '/v1/models', method: 'GET', url: '/v1/models', status: 200 },
  { route: '/v1beta/models', method: 'GET', url: '/v1beta/models', status: 200 },
  { route: '/v1/responses/:id', method: 'GET', url: '/v1/responses/resp_1', status: 404 },
  { route: '/v1/responses/:id', method: 'DELETE', url: '/v1/responses/resp_1', status: 404 },
  { route: '/v1/responses/:id/cancel', method: 'POST', url: '/v1/responses/resp_1/cancel', status: 404 },
  { route: '/v1/responses/:id/input_items', method: 'GET', url: '/v1/responses/resp_1/input_items', status: 404 },
  { route: '/v1beta/*', method: 'POST', url: '/v1beta/files', status: 404 },
  { route: '/mcp', method: 'DELETE', url: '/mcp', status: 405 },
  { route: '/mcp/:server', method: 'DELETE', url: '/mcp/docs', status: 405 }
]

/** The embedding and image models, beside the chat models of the mock catalog. */
const media = (id: string, provider: string, upstream: string, kind: 'embeddings' | 'image'): Record<string, unknown> => ({
  id,
  name: id,
  provider,
  upstream_model: upstream,
  context_length: 8192,
  architecture: { input_modalities: ['text'], output_modalities: [kind] },
  pricing: kind === 'embeddings' ? { input: 0.1, output: 0 } : { input: 5, output: 40 },
  ...(kind === 'image' ? { max_output_tokens: 100 } : {})
})
const WIDE_PARAMS = ['temperature', 'max_tokens', 'max_completion_tokens', 'n', 'tools', 'web_search_options', 'thinking']
const chatModel = (id: string, provider: string, upstream: string, pricing: Record<string, unknown> = { input: 3, output: 15 }): Record<string, unknown> => ({
  id, name: id, provider, upstream_model: upstream, context_length: 200000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, supported_parameters: WIDE_PARAMS, pricing
})
const MEDIA = [
  chatModel('openai/gpt-wide', 'mock-openai', 'gpt-wide-up'),
  chatModel('google/gemini-wide', 'mock-gemini', 'gemini-wide-up'),
  chatModel('anthropic/claude-search', 'mock-messages', 'claude-search-up', { input: 3, output: 15, server_tools: { web_search: 0.01 } }),
  media('openai/embed-test', 'mock-openai', 'text-embedding-up', 'embeddings'),
  media('google/embed-test', 'mock-gemini', 'gemini-embedding-up', 'embeddings'),
  media('openai/image-test', 'mock-openai', 'gpt-image-up', 'image')
]

function gateConfig (mock: MockUpstream, mcp: MockMcpHttp, file: string): Config {
  const catalog = mockCatalogWithGemini(mock, MEDIA)
  // the OpenAI provider serves Responses itself, which reads the files a Responses body names
  const providers = (catalog.providers as Array<Record<string, unknown>>).map((p) => ALL_PROVIDERS.includes(p.id as string) ? { ...p, passthrough: true, responses: p.id === 'mock-openai' } : p)
  const key = (key: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ key, passthrough: ALL_PROVIDERS, mcp: ['*'], ...extra })
  return testConfig({
    ...catalog,
    models: [...catalog.models as unknown[], { id: 'team/smart', name: 'Smart', alias_of: ['openai/gpt-test', 'anthropic/claude-test'] }],
    providers,
    store: { sqlite: file },
    // an MCP server whose tools are priced per call, as a model is per token
    mcp: { servers: [{ id: 'docs', transport: 'http', url: mcp.url, pricing: { per_call: 0.001 } }] },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }],
    tenants: [
      {
        org: 'acme',
        balance_usd: 100,
        projects: [
          {
            id: 'web',
            keys: [
              key(K.valid), key(K.ungranted, { models: ['nothing/*'], mcp: ['nothing/*'] }), key(K.nopass, { passthrough: [] }), key(K.expired, { expires_at: '2020-01-01' }),
              key(K.rpm, { limits: { rpm: 2 } }), key(K.budget, { budget: { usd: 0.001, per: 'day' } }), key(K.revokedReload), key(K.revokedRestart),
              key(K.aliasOnly, { models: ['team/smart'], mcp: ['nothing/*'] })
            ]
          },
          { id: 'dead', keys: [key(K.projectGone)] }
        ]
      },
      { org: 'broke', balance_usd: 0, projects: [{ id: 'app', keys: [key(K.broke)] }] },
      { org: 'small', balance_usd: 1, projects: [{ id: 'app', keys: [key(K.small)] }] },
      { org: 'gone', balance_usd: 10, projects: [{ id: 'app', keys: [key(K.orgGone)] }] }
    ]
  })
}

/**
 * The status a call was answered with: the HTTP status, or on /mcp, where a tools/call refused by
 * the gate is a JSON-RPC error in a 200 (or in an event of a stream), the status its data carries.
 */
function statusOf (res: LightMyRequestResponse): number {
  if (res.statusCode !== 200) return res.statusCode
  const text = String(res.headers['content-type'] ?? '').startsWith('text/event-stream')
    ? res.body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('')
    : res.body
  let rpc: { jsonrpc?: unknown, error?: { data?: { status?: number } } } = {}
  try { rpc = JSON.parse(text) as typeof rpc } catch {}
  return rpc.jsonrpc === '2.0' ? rpc.error?.data?.status ?? 200 : 200
}

const idOf = async (store: Store, secret: string): Promise<string> => {
  const k = await store.keys.verify(secret)
  if (k === undefined) throw new Error('no such key')
  return k.id
}

t.test('every route against every key state', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(async () => { await mock.close() })
  const mcp = await mockMcpHttp()
  t.teardown(async () => { await mcp.close() })
  const clock = new FakeClock()
  const config = gateConfig(mock, mcp, join(tempDir('gate'), 'gw.db'))
  // what reached a provider or an MCP server
  const reachedSoFar = (): number => mock.requests.length + mcp.tools.calls.length

  // the first generation: keys made, revoked, rotated, tenants deleted through the store
  let store = openStore(config)
  const first = await buildApp(config, { store, clock, logger: false })
  const keys = new Map<State, string>([
    ['valid', K.valid], ['ungranted', K.ungranted], ['no passthrough', K.nopass], ['expired', K.expired], ['over rpm', K.rpm], ['over budget', K.budget],
    ['balance 0', K.broke], ['balance $1', K.small], ['org deleted', K.orgGone], ['project deleted', K.projectGone], ['revoked, reloaded', K.revokedReload], ['revoked, restarted', K.revokedRestart], ['alias only', K.aliasOnly]
  ])
  // a key whose list of models is empty (an old row: the config and the admin API refuse one now)
  keys.set('empty grants', (await store.keys.create({ org: 'acme', project: 'web', models: [], passthrough: ALL_PROVIDERS, source: 'admin' }, clock.now())).key)
  const revoked = await store.keys.create({ org: 'acme', project: 'web', passthrough: ALL_PROVIDERS, source: 'admin' }, clock.now())
  await store.keys.revoke(revoked.id, clock.now(), 'admin')
  keys.set('revoked', revoked.key)
  const rotated = await store.keys.create({ org: 'acme', project: 'web', passthrough: ALL_PROVIDERS, source: 'admin' }, clock.now())
  await store.keys.rotate(rotated.id, clock.now() - 1, clock.now(), 'admin')
  keys.set('rotated past grace', rotated.key)
  for (const secret of [K.revokedReload, K.revokedRestart]) await store.keys.revoke(await idOf(store, secret), clock.now(), 'admin')
  await store.orgs.remove('gone', clock.now(), 'admin')
  await store.orgs.removeProject('acme', 'dead', clock.now(), 'admin')

  // a reload (a new generation on the same store) and a restart (the store opened again)
  const reloaded = await buildApp(config, { store, clock, logger: false })
  await first.close()
  await reloaded.close()
  await store.close()
  store = openStore(config)
  const app = await buildApp(config, { store, clock, logger: false })
  t.teardown(async () => { await app.close(); await store.close() })
  await app.listen({ host: '127.0.0.1', port: 0 })

  // over rpm and over budget: their windows filled
  const now = clock.now()
  const rpmLine = (await store.keys.verify(K.rpm))?.lineage as string
  for (let i = 0; i < 2; i++) await store.rateLimits.hit(`key-rpm:${rpmLine}`, now, 60_000, 2)
  const budgetLine = (await store.keys.verify(K.budget))?.lineage as string
  await store.quota.count(budgetScope(budgetLine), quotaWindow('day', now).start, 0, 1_000_000, { costNano: 1_000_000 })
  // objects another organization made through pass-through
  const rival = { org: 'gone', project: 'app' }
  await store.objects.claim('mock-openai', [{ kind: 'files', id: 'file-other-org' }], rival, now)
  await store.objects.claim('mock-messages', [{ kind: 'message_batches', id: 'msgbatch_other' }, { kind: 'files', id: 'file_other_org' }], rival, now)
  await store.objects.claim('mock-gemini', [{ kind: 'files', id: 'files/other-org' }, { kind: 'cached_contents', id: 'cachedContents/other-org' }], rival, now)

  const want: Record<string, Record<string, Cell>> = {}
  const got: Record<string, Record<string, Cell>> = {}
  const bodies: string[] = []
  // what each refused call left in the usage records: a record of its key, or none before a key is known
  const wantRecords: string[] = []
  const gotRecords: string[] = []
  const traceHeader = `${config.server.header_prefix}Trace-ID`.toLowerCase()
  const keyIds = new Map<State, string>()
  for (const [state, secret] of keys) {
    const k = await store.keys.verify(secret)
    if (k !== undefined) keyIds.set(state, k.id)
  }
  for (const [i, row] of ROWS.entries()) {
    // a second passes every few rows: the records of a key's refusals are kept up to ten a second
    if (i % 5 === 4) clock.advance(1000)
    want[row.name] = {}
    got[row.name] = {}
    for (const state of STATES) {
      const before = reachedSoFar()
      const res = await row.call(app, keys.get(state) as string)
      const reached = reachedSoFar() > before
      const status = statusOf(res)
      const cell: Cell = reached && status < 500 ? 'ok' : status;
      (want[row.name] as Record<string, Cell>)[state] = expected(row.kind, state);
      (got[row.name] as Record<string, Cell>)[state] = cell
      if (cell !== expected(row.kind, state)) bodies.push(`${row.name} / ${state}: ${status} reached=${String(reached)} ${res.body.slice(0, 300)}`)
      if (typeof cell === 'number' && cell >= 400) t.notOk(reached, `${row.name} / ${state}: refused, and nothing reached the provider`)
      if (typeof cell === 'number' && cell >= 400 && row.kind !== 'listing' && row.kind !== 'tool-list') {
        const cellName = `${row.name} / ${state}`
        wantRecords.push(cell === 401 ? `${cellName}: none` : `${cellName}: refused by ${keyIds.get(state) ?? '?'}, nothing spent`)
        const found = (await store.usage.byTrace(String(res.headers[traceHeader])))?.row
        const spent = found === undefined ? 0 : found.prompt_tokens + found.completion_tokens + found.cost_nano + found.images
        gotRecords.push(found === undefined
          ? `${cellName}: none`
          : found.status === 'refused' && typeof found.error === 'string' && found.error !== '' && spent === 0
            ? `${cellName}: refused by ${found.key_id ?? 'no key'}, nothing spent`
            : `${cellName}: ${found.status} ${String(found.error)} spent ${spent}`)
      }
    }
  }
  t.same(got, want, bodies.length === 0 ? 'every cell as expected' : `cells that differ:\n${bodies.join('\n')}`)
  t.same(gotRecords, wantRecords, 'every refusal of a known key is a refused usage record with its code; a refusal before a key is known has none')

  // the table covers every route of the API that may spend
  for (const r of app.apiRoutes) {
    for (const method of r.methods) {
      if (r.metered) {
        t.ok(ROWS.some((row) => row.route === r.url && row.covers.includes(method)), `${method} ${r.url} is metered: it has a row in the table`)
      } else if (r.url !== '/v1/*' && r.url !== '/v1beta/*' && r.url !== '/passthrough/*' && !['GET', 'HEAD'].includes(method)) {
        t.ok(SPENDS_NOTHING.some((s) => s.route === r.url && s.method === method), `${method} ${r.url} is not metered: it is listed as spending nothing`)
      }
    }
  }
  for (const s of SPENDS_NOTHING) {
    const before = reachedSoFar()
    const res = await app.inject({ method: s.method as 'GET', url: s.url, headers: s.method === 'POST' ? json(K.valid) : bearer(K.valid), payload: s.method === 'POST' ? '{}' : undefined })
    t.equal(res.statusCode, s.status, `${s.method} ${s.url} spends nothing: ${s.status}`)
    t.equal(reachedSoFar(), before, `${s.method} ${s.url} reaches no provider`)
  }
})
