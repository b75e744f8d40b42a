import type { ProviderConfig } from '../../../config/schema.js'
import { credentialsOf } from '../credentials.js'
import type { Platform } from './types.js'

// The vendor's own API, as every provider was reached before platforms: the pairs' paths and
// bodies as they are, and the provider's static key in the header its protocol names (an OpenAI
// bearer token, Google's x-goog-api-key, Anthropic's x-api-key).

/** The credential headers of a provider on its vendor's API: its key in its protocol's header. */
export function vendorKeyHeaders (provider: Pick<ProviderConfig, 'api_key' | 'protocol'>): Record<string, string> {
  if (provider.api_key === '') return {}
  if (provider.protocol === 'openai') return { authorization: `Bearer ${provider.api_key}` }
  if (provider.protocol === 'gemini') return { 'x-goog-api-key': provider.api_key }
  return { 'x-api-key': provider.api_key }
}

export function vendorPlatform (provider: ProviderConfig): Platform {
  const headers = vendorKeyHeaders(provider)
  const secrets = credentialsOf(provider)
  return {
    name: 'vendor',
    traceName: null,
    baseUrl: provider.base_url ?? '',
    // a built-in provider needs none; an HTTP provider without a key serves nothing (a local
    // server that needs no key takes any placeholder)
    configured: provider.builtin !== undefined || provider.api_key !== '',
    target: (call) => ({ path: call.path, body: call.body }),
    authorize: () => headers,
    secrets: () => secrets
  }
}
