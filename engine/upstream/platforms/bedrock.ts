import { Transform, type Readable, type TransformCallback } from 'node:stream'
import type { ProviderConfig } from '../../../config/schema.js'
import { isObj, type Json } from '../../kernel/json.js'
import { EventStreamParser, converseFrame, errorName, invokeFrame, messagesError, modelSegment } from '../../protocols/converse/index.js'
import { serialize } from '../../protocols/sse.js'
import { credentialsOf, secretsOf } from '../credentials.js'
import { awsKeys, bedrockSigner, type BedrockAuth, type SignableCall } from './aws-sign.js'
import type { OutgoingRequest, Platform, PlatformCall, PlatformDeps, PlatformTarget } from './types.js'

// AWS Bedrock: Converse for any Bedrock text model (the Converse codec's paths and bodies as they
// are), InvokeModel with the Messages body for Anthropic models (no `model`, no `stream`,
// `anthropic_version` added). Every request is signed with Signature Version 4 over its final
// bytes (aws-sign.ts), or carries a Bedrock API key as a Bearer token. Streamed answers come as
// AWS event streams, read into the frames the protocol's stream mapper takes.

/** The version of the Messages API that Bedrock's InvokeModel takes in the body. */
export const BEDROCK_ANTHROPIC_VERSION = 'bedrock-2023-05-31'

/** How the provider authenticates: its api_key as a Bearer token, else SigV4 with its `aws` keys or the environment's; null without any. */
export function bedrockAuth (provider: Pick<ProviderConfig, 'api_key' | 'aws' | 'region'>, env: Readonly<Record<string, string | undefined>>): BedrockAuth | null {
  if (provider.api_key !== '') return { kind: 'bearer', apiKey: provider.api_key }
  const keys = awsKeys(provider.aws, env)
  return keys === null ? null : { kind: 'sigv4', keys, region: provider.region ?? 'us-east-1' }
}

// a path of one leading slash and characters a URL keeps as they are (percent escapes included),
// and a `.` or `..` segment in one (written with %2e too, as URL reads them)
const PLAIN_PATH = /^\/(?!\/)[A-Za-z0-9\-._~%!$&'()*+,;=:@/]*$/
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?:\/|$)/i
const NO_QUERY = new URLSearchParams()

/**
 * The URL a request's path names on `origin`, for its signature. A plain path (a model call's: no
 * query, no dot segment, only characters a URL keeps as they are) is taken as it is, without a URL
 * parser's cost on every call; any other (a pass-through call's) is read by URL, as it is sent.
 */
export function signingUrl (origin: URL, path: string): SignableCall['url'] {
  return PLAIN_PATH.test(path) && !DOT_SEGMENT.test(path)
    ? { host: origin.host, pathname: path, search: '', searchParams: NO_QUERY }
    : new URL(path, origin)
}

/** An event-stream body → the SSE text of its frames, for the relay's SSE reader. */
class EventStreamToSse extends Transform {
  private readonly parser: EventStreamParser
  constructor (invoke: boolean) {
    super({ readableObjectMode: false })
    this.parser = new EventStreamParser(invoke ? invokeFrame : converseFrame)
  }

  override _transform (chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let text = ''
    try {
      for (const f of this.parser.push(chunk)) text += serialize(f)
    } catch (err) {
      cb(err as Error)
      return
    }
    if (text !== '') this.push(text)
    cb()
  }

  override _flush (cb: TransformCallback): void {
    try {
      this.parser.end()
    } catch (err) {
      cb(err as Error)
      return
    }
    cb()
  }
}

export function bedrockPlatform (provider: ProviderConfig, deps: PlatformDeps): Platform {
  const auth = bedrockAuth(provider, deps.env)
  const sign = auth === null ? null : bedrockSigner(auth)
  const secrets = secretsOf([
    ...credentialsOf(provider),
    ...(auth?.kind === 'sigv4' ? [auth.keys.secretAccessKey, ...(auth.keys.sessionToken === undefined ? [] : [auth.keys.sessionToken])] : [])
  ])
  const baseUrl = provider.base_url ?? `https://bedrock-runtime.${provider.region ?? 'us-east-1'}.amazonaws.com`
  const origin = new URL(baseUrl)

  const target = (call: PlatformCall): PlatformTarget | undefined => {
    if (call.protocol === 'converse') return { path: call.path, body: call.body }
    if (call.protocol === 'messages') {
      // Messages' count_tokens: the gateway's estimate answers it (see docs/configuration.md)
      if (call.path !== '/v1/messages') return undefined
      const { model: _model, stream: _stream, ...rest } = (call.body ?? {}) as Json
      return {
        path: `/model/${modelSegment(call.model)}/${call.stream ? 'invoke-with-response-stream' : 'invoke'}`,
        body: { anthropic_version: BEDROCK_ANTHROPIC_VERSION, ...rest }
      }
    }
    return undefined
  }

  // synchronous: a call waits for no promise to be signed
  const authorize = (req: OutgoingRequest): Record<string, string> => {
    if (sign === null) throw new Error(`provider ${provider.id} has no AWS credentials`)
    if (auth?.kind === 'bearer') return sign({ method: req.method, url: origin, headers: {}, body: '' })
    if (req.body !== undefined && typeof req.body !== 'string') throw new Error(`provider ${provider.id}: a streamed body cannot be signed`)
    const url = signingUrl(origin, req.path)
    const type = req.headers['content-type']
    const headers: Record<string, string> = {}
    if (typeof type === 'string') headers['content-type'] = type
    return sign({ method: req.method, url, headers, body: req.body ?? '' })
  }

  return {
    name: 'bedrock',
    traceName: 'aws.bedrock',
    baseUrl,
    configured: auth !== null,
    target,
    authorize,
    decodeStream: (body: Readable, contentType: string | undefined) => {
      if (contentType !== undefined && !contentType.startsWith('application/vnd.amazon.eventstream')) return body
      const out = new EventStreamToSse(provider.protocol === 'messages')
      body.once('error', (err) => out.destroy(err))
      return body.pipe(out)
    },
    errorBody: (status, headers, body) => {
      const header = headers['x-amzn-errortype']
      const name = errorName(body, typeof header === 'string' ? header : undefined)
      // a Messages upstream's pairs read Anthropic's error body; Converse's codec reads Bedrock's own, named
      if (provider.protocol === 'messages') return messagesError(status, body, name)
      return isObj(body) ? { ...body, ...(name === undefined ? {} : { __type: name }) } : { message: typeof body === 'string' ? body : '', ...(name === undefined ? {} : { __type: name }) }
    },
    secrets: () => secrets
  }
}
