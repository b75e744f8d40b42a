import { generateKeyPairSync, type KeyPairKeyObjectResult } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { jwtVerify } from 'jose'
import { request } from 'undici'
import type { Json } from '../engine/kernel/json.js'
import type { MockUpstream } from './mock-upstream.js'

// Azure OpenAI and Google Vertex AI as a local server in front of the mock upstream
// (test/mock-upstream.ts), for the platforms' tests. It checks what each platform checks and
// answers as each answers, and leaves the model's answer to the mock behind it:
//
//   Azure   POST /openai/deployments/{deployment}/{chat/completions|embeddings|images/generations}
//           ?api-version=…: the `api-key` header must be the Azure key and no Authorization may
//           come; `api-version` is required. Answers: the mock's OpenAI answer, its `model` the
//           deployment's. `contentFilter` answers the next call with Azure's content-filter 400.
//           POST /openai/v1/responses (and /openai/responses?api-version=…): the Responses API,
//           the deployment in the body's model; the same key checks.
//   Vertex  POST /{v1|v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{m}:{method}
//           (generateContent, streamGenerateContent?alt=sse, countTokens) and
//           …/publishers/anthropic/models/{m}:{rawPredict|streamRawPredict}: a Bearer token this
//           server's token endpoint issued and that has not expired (401 in Google's shape
//           otherwise); every contents[] entry must carry its role; a rawPredict body must carry
//           anthropic_version vertex-2023-10-16 and no model.
//   Token   POST /token: RFC 7523's JWT bearer grant; the assertion is verified with jose against
//           the service account's public key (RS256, iss = sub = client_email, aud = this URL,
//           scope cloud-platform), answered {access_token, expires_in, token_type}.

export interface PlatformSeen {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: Json | null
}

export const AZURE_KEY = 'azure-test-key-0123456789abcdef'
export const SA_EMAIL = 'gateway@test-project.iam.gserviceaccount.com'

export interface MockPlatforms {
  url: string
  seen: PlatformSeen[]
  /** The tokens issued by /token, in order. */
  issued: string[]
  /** Token exchanges answered. */
  exchanges: () => number
  /** Answer the next Azure chat call with the content-filter 400. */
  contentFilter: () => void
  /** Refuse every Vertex token issued so far (as after a key rotation): the next call with one gets 401. */
  revokeTokens: () => void
  /** The service-account key file, written in `dir`, whose token_uri is this server's. */
  serviceAccountFile: (dir: string) => string
  /** The current time of the token endpoint's clock (ms). */
  close: () => Promise<void>
}

// the service account's key pair, made once a process: an RSA key takes a tenth of a second or
// more to make, and each platform server's tokens are its own whatever key signs their requests
let keyPair: KeyPairKeyObjectResult | undefined

export async function startMockPlatforms (mock: MockUpstream, opts: { now: () => number, expiresIn?: number }): Promise<MockPlatforms> {
  keyPair ??= generateKeyPairSync('rsa', { modulusLength: 2048 })
  const { privateKey, publicKey } = keyPair
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const seen: PlatformSeen[] = []
  const issued: string[] = []
  const valid = new Map<string, number>()
  let exchanges = 0
  let filterNext = false
  let url = ''

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      let body: Json | null = null
      try { body = JSON.parse(raw) as Json } catch { body = null }
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })
      handle(req.method ?? '', req.url ?? '', req.headers, raw, body).then(({ status, headers, body: out }) => {
        res.writeHead(status, headers)
        if (typeof out === 'string') res.end(out)
        else out.pipe(res)
      }).catch((err: unknown) => {
        res.writeHead(500, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: String(err) } }))
      })
    })
  })

  type Answer = { status: number, headers: Record<string, string>, body: string | NodeJS.ReadableStream }
  const json = (status: number, value: unknown): Answer => ({ status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) })
  const google = (status: number, message: string, s: string): Answer => json(status, { error: { code: status, message, status: s } })

  async function forward (path: string, body: Json): Promise<Answer> {
    const res = await request(`${mock.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer mock', 'x-api-key': 'mock', 'x-goog-api-key': 'mock', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) })
    const type = res.headers['content-type']
    return { status: res.statusCode, headers: { 'content-type': typeof type === 'string' ? type : 'application/json' }, body: res.body }
  }

  async function handle (method: string, target: string, headers: IncomingHttpHeaders, raw: string, body: Json | null): Promise<Answer> {
    const u = new URL(target, 'http://x')
    if (method === 'POST' && u.pathname === '/token') return await token(raw)
    const azure = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings|images\/generations)$/.exec(u.pathname)
    if (azure !== null) {
      if (headers.authorization !== undefined) return json(401, { error: { code: '401', message: 'Access denied: an Authorization header is not an api-key.' } })
      if (headers['api-key'] !== AZURE_KEY) return json(401, { error: { code: '401', message: 'Access denied due to invalid subscription key or wrong API endpoint.' } })
      if (u.searchParams.get('api-version') === null) return json(404, { error: { code: '404', message: 'Resource not found' } })
      if (body === null) return json(400, { error: { code: 'BadRequest', message: 'invalid JSON' } })
      const deployment = decodeURIComponent(azure[1] as string)
      if (azure[2] === 'chat/completions' && filterNext) {
        filterNext = false
        return json(400, {
          error: {
            message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
            type: null,
            param: 'prompt',
            code: 'content_filter',
            status: 400,
            innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: { hate: { filtered: true, severity: 'high' }, violence: { filtered: false, severity: 'safe' } } }
          }
        })
      }
      return await forward(`/v1/${azure[2] as string}`, { ...body, model: deployment })
    }
    // the Responses API: Azure's v1 route, or the dated route the openai SDK's AzureOpenAI calls
    // (/openai/responses?api-version=…); the deployment is the body's model
    if (u.pathname === '/openai/v1/responses' || u.pathname === '/openai/responses') {
      if (headers.authorization !== undefined) return json(401, { error: { code: '401', message: 'Access denied: an Authorization header is not an api-key.' } })
      if (headers['api-key'] !== AZURE_KEY) return json(401, { error: { code: '401', message: 'Access denied due to invalid subscription key or wrong API endpoint.' } })
      if (u.pathname === '/openai/responses' && u.searchParams.get('api-version') === null) return json(404, { error: { code: '404', message: 'Resource not found' } })
      if (body === null || typeof body.model !== 'string') return json(400, { error: { code: 'BadRequest', message: 'model (the deployment) is required' } })
      return await forward('/v1/responses', body)
    }
    const vertex = /^\/(v1|v1beta1)\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(google|anthropic)\/models\/([^/:]+):([A-Za-z]+)$/.exec(u.pathname)
    if (vertex !== null) {
      const auth = /^Bearer (\S+)$/.exec(headers.authorization ?? '')?.[1]
      const until = auth === undefined ? undefined : valid.get(auth)
      if (until === undefined || until <= opts.now()) return google(401, 'Request had invalid authentication credentials. Expected OAuth 2 access token.', 'UNAUTHENTICATED')
      if (body === null) return google(400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT')
      const model = decodeURIComponent(vertex[5] as string)
      const m = vertex[6] as string
      if (vertex[4] === 'google') {
        const contents = Array.isArray(body.contents) ? body.contents as Json[] : []
        if (contents.some((c) => typeof c.role !== 'string')) return google(400, 'Please use a valid role: user, model.', 'INVALID_ARGUMENT')
        if (m === 'countTokens') return await forward(`/v1beta/models/${encodeURIComponent(model)}:countTokens`, { generateContentRequest: { model: `models/${model}`, ...body } })
        if (m !== 'generateContent' && m !== 'streamGenerateContent') return google(404, `method ${m} not found`, 'NOT_FOUND')
        return await forward(`/v1beta/models/${encodeURIComponent(model)}:${m}${m === 'streamGenerateContent' ? '?alt=sse' : ''}`, body)
      }
      if (m !== 'rawPredict' && m !== 'streamRawPredict') return google(404, `method ${m} not found`, 'NOT_FOUND')
      if (body.anthropic_version !== 'vertex-2023-10-16') return json(400, { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic_version: vertex-2023-10-16 is required' } })
      if (body.model !== undefined) return json(400, { type: 'error', error: { type: 'invalid_request_error', message: 'model: Extra inputs are not permitted' } })
      const { anthropic_version: _v, ...rest } = body
      return await forward('/v1/messages', { ...rest, model })
    }
    return json(404, { error: { message: `no route ${method} ${u.pathname}` } })
  }

  async function token (raw: string): Promise<Answer> {
    const form = new URLSearchParams(raw)
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return json(400, { error: 'unsupported_grant_type' })
    try {
      const { payload } = await jwtVerify(form.get('assertion') ?? '', publicKey, {
        algorithms: ['RS256'], issuer: SA_EMAIL, subject: SA_EMAIL, audience: `${url}/token`, currentDate: new Date(opts.now())
      })
      if (payload.scope !== 'https://www.googleapis.com/auth/cloud-platform') return json(400, { error: 'invalid_scope' })
    } catch (err) {
      if (process.env.DEBUG_TOKEN !== undefined) console.error(err)
      return json(400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' })
    }
    exchanges++
    const value = `ya29.test-token-${exchanges}-abcdefghij`
    const expiresIn = opts.expiresIn ?? 3600
    issued.push(value)
    valid.set(value, opts.now() + expiresIn * 1000)
    return json(200, { access_token: value, expires_in: expiresIn, token_type: 'Bearer' })
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    seen,
    issued,
    exchanges: () => exchanges,
    contentFilter: () => { filterNext = true },
    revokeTokens: () => { valid.clear() },
    serviceAccountFile: (dir) => {
      const file = join(dir, 'service-account.json')
      writeFileSync(file, JSON.stringify({ type: 'service_account', project_id: 'test-project', private_key_id: 'key1', private_key: pem, client_email: SA_EMAIL, token_uri: `${url}/token` }))
      return file
    },
    close: async () => { await new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }) }
  }
}
