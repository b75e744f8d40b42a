import type { ProviderConfig } from '../../../config/schema.js'
import { isObj, type Json } from '../../kernel/json.js'
import { credentialsOf, secretsOf } from '../credentials.js'
import type { Platform, PlatformCall, PlatformDeps, PlatformTarget } from './types.js'
import { readServiceAccount, ServiceAccountTokens, type ServiceAccount } from './vertex-token.js'

// Google Vertex AI: Gemini models through the Gemini API's methods under the project's and
// location's publisher path (`…/publishers/google/models/{m}:generateContent`), Anthropic models
// through rawPredict with the Messages body (no `model`, `anthropic_version` added). A Bearer
// access token: the configured access_token as it is, or one from the service-account file
// (vertex-token.ts), renewed once when the upstream answers 401.

/** The version of the Messages API that Vertex AI takes in the body. */
export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16'

/** The Gemini API's methods that a Vertex publisher model serves, as the gateway calls them. */
const GEMINI_METHODS = new Set(['generateContent', 'streamGenerateContent', 'countTokens'])

/** Vertex AI's endpoint for a location: the global one, or the location's own. */
export function vertexBaseUrl (location: string): string {
  return location === 'global' ? 'https://aiplatform.googleapis.com' : `https://${location}-aiplatform.googleapis.com`
}

export function vertexPlatform (provider: ProviderConfig, deps: PlatformDeps): Platform {
  const prefix = `/v1/projects/${encodeURIComponent(provider.project ?? '')}/locations/${encodeURIComponent(provider.location ?? '')}/publishers`
  const staticToken = provider.access_token !== undefined && provider.access_token !== '' ? provider.access_token : undefined
  const fixed = secretsOf([...credentialsOf(provider), ...(staticToken === undefined ? [] : [staticToken])])
  let tokens: ServiceAccountTokens | undefined
  let account: ServiceAccount | undefined
  // the file is read when the gateway starts and at each reload; one that cannot be read leaves
  // the provider without credentials (its models unserved), said in the log by the caller
  let problem: string | undefined
  if (staticToken === undefined && provider.credentials_file !== undefined && provider.credentials_file !== '') {
    try {
      account = readServiceAccount(provider.credentials_file)
      tokens = new ServiceAccountTokens(account, deps.now, `provider ${provider.id}`)
    } catch (err) {
      problem = (err as Error).message
    }
  }
  const keySecrets = account === undefined ? [] : secretsOf([account.private_key])

  const target = (call: PlatformCall): PlatformTarget | undefined => {
    const model = encodeURIComponent(call.model)
    if (call.protocol === 'gemini') {
      const q = call.path.indexOf('?')
      const path = q === -1 ? call.path : call.path.slice(0, q)
      const method = path.slice(path.lastIndexOf(':') + 1)
      if (!GEMINI_METHODS.has(method) || !path.includes(':')) return undefined
      return { path: `${prefix}/google/models/${model}:${method}${q === -1 ? '' : call.path.slice(q)}`, body: call.body === undefined ? undefined : geminiBodyOnVertex(call.body, method) }
    }
    if (call.protocol === 'messages') {
      // Messages' count_tokens has no publisher method of its own: the gateway's estimate answers it
      if (call.path !== '/v1/messages') return undefined
      const { model: _model, ...rest } = (call.body ?? {}) as Record<string, unknown>
      return {
        path: `${prefix}/anthropic/models/${model}:${call.stream ? 'streamRawPredict' : 'rawPredict'}`,
        body: { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...rest } as PlatformTarget['body']
      }
    }
    return undefined
  }

  return {
    name: 'vertex',
    traceName: 'gcp.vertex_ai',
    baseUrl: provider.base_url ?? vertexBaseUrl(provider.location ?? 'global'),
    configured: staticToken !== undefined || tokens !== undefined,
    problem,
    target,
    authorize: () => {
      if (staticToken !== undefined) return { authorization: `Bearer ${staticToken}` }
      if (tokens === undefined) throw new Error(`provider ${provider.id} has no Vertex AI credentials${problem === undefined ? '' : `: ${problem}`}`)
      const t = tokens.get()
      return typeof t === 'string' ? { authorization: `Bearer ${t}` } : t.then((v) => ({ authorization: `Bearer ${v}` }))
    },
    // a token given as it is cannot be renewed here
    refresh: tokens === undefined
      ? undefined
      : async () => {
        tokens.invalidate(undefined)
        await tokens.get()
        return true
      },
    // the configured strings, the service account's key, and the tokens handed out lately
    secrets: () => tokens === undefined ? fixed : secretsOf([...fixed, ...keySecrets, ...tokens.secrets()])
  }
}

/**
 * A Gemini API body as Vertex AI takes it: every `contents[]` entry with its role (the Gemini API
 * reads a missing one as the user's, Vertex refuses it), and countTokens' request at the top level
 * (the Gemini API wraps it in `generateContentRequest` with the model, Vertex names the model in the URL).
 */
function geminiBodyOnVertex (body: Json, method: string): Json {
  let out = body
  const inner = out.generateContentRequest
  if (method === 'countTokens' && isObj(inner)) {
    const { model: _model, ...request } = inner
    out = request
  }
  const contents = out.contents
  if (Array.isArray(contents) && contents.some((c) => isObj(c) && typeof c.role !== 'string')) {
    out = { ...out, contents: contents.map((c) => isObj(c) && typeof c.role !== 'string' ? { ...c, role: 'user' } : c) }
  }
  return out
}
