import type { Config, ProviderConfig } from '../../config/schema.js'

// Kept apart from the HTTP clients: `modelgate config check` reads it without loading them.

// An HTTP provider without credentials cannot be called: the shipped catalog's real providers
// serve nothing until OPENAI_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY are set, and their models
// are listed nowhere. (A local server that needs no key takes any placeholder.) On a cloud
// platform the credentials are the platform's: Azure's api_key, Vertex's credentials_file or
// access_token, Bedrock's aws keys, the environment's AWS_* variables or api_key.
export function hasCredentials (p: ProviderConfig, env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  return credentialFields(p, env).length === 0
}

/**
 * The config fields a provider's missing credentials would be read from (empty: it has them),
 * each with the environment variable that may fill it; present, not checked with the upstream.
 */
export function credentialFields (p: ProviderConfig, env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  if (p.builtin !== undefined) return []
  const set = (v: string | undefined): boolean => v !== undefined && v !== ''
  switch (p.platform) {
    case 'vertex': return set(p.credentials_file) || set(p.access_token) ? [] : ['credentials_file']
    case 'bedrock': return set(p.api_key) || (p.aws !== undefined) || (set(env.AWS_ACCESS_KEY_ID) && set(env.AWS_SECRET_ACCESS_KEY)) ? [] : ['aws', 'api_key']
    default: return set(p.api_key) ? [] : ['api_key']
  }
}

/** The providers of a config that cannot be called for want of credentials. */
export function withoutCredentials (config: Config, env: Readonly<Record<string, string | undefined>> = process.env): ProviderConfig[] {
  return config.providers.filter((p) => !hasCredentials(p, env))
}
