import type { ProviderConfig } from '../../../config/schema.js'
import { credentialsOf } from '../credentials.js'
import type { Platform } from './types.js'

// Azure OpenAI: the OpenAI protocol's bodies at the deployment's URL. The deployment is the
// model's name on this provider (its upstream_model); `api-version` goes in the query of every
// call to a deployment's URL (the Responses API is at /openai/v1/responses, the deployment in its body);
// the key goes in the `api-key` header, never in Authorization (Azure reads a bearer token as an
// Entra ID token and refuses a key there).

/** The OpenAI API's model calls that Azure serves under a deployment. */
const DEPLOYMENT_CALLS = new Set(['/chat/completions', '/completions', '/embeddings', '/images/generations'])

export function azurePlatform (provider: ProviderConfig): Platform {
  const version = encodeURIComponent(provider.api_version ?? '')
  const headers: Record<string, string> = provider.api_key === '' ? {} : { 'api-key': provider.api_key }
  const secrets = credentialsOf(provider)
  return {
    name: 'azure',
    traceName: 'azure.openai',
    baseUrl: provider.base_url ?? '',
    configured: provider.api_key !== '',
    target: (call) => {
      const q = call.path.indexOf('?')
      const path = q === -1 ? call.path : call.path.slice(0, q)
      // the Responses API (a provider's `responses: true`) is Azure's v1 API: the deployment is the
      // body's model, and no api-version is asked
      if (path === '/responses') return { path: `/openai/v1/responses${q === -1 ? '' : call.path.slice(q)}`, body: call.body }
      // anything else the deployment URLs do not serve: not here
      if (!DEPLOYMENT_CALLS.has(path)) return undefined
      const query = q === -1 ? '' : `&${call.path.slice(q + 1)}`
      return { path: `/openai/deployments/${encodeURIComponent(call.model)}${path}?api-version=${version}${query}`, body: call.body }
    },
    authorize: () => headers,
    secrets: () => secrets
  }
}
