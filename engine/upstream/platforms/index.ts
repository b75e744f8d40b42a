import type { ProviderConfig } from '../../../config/schema.js'
import { azurePlatform } from './azure.js'
import { bedrockPlatform } from './bedrock.js'
import type { Platform, PlatformDeps } from './types.js'
import { vendorPlatform } from './vendor.js'
import { vertexBaseUrl, vertexPlatform } from './vertex.js'

export type { OutgoingRequest, Platform, PlatformCall, PlatformDeps, PlatformName, PlatformTarget } from './types.js'
export { vendorKeyHeaders } from './vendor.js'

/** The platform of a provider: its `platform`, or the vendor's own API. */
export function platformFor (provider: ProviderConfig, deps: PlatformDeps): Platform {
  switch (provider.platform) {
    case 'azure': return azurePlatform(provider)
    case 'bedrock': return bedrockPlatform(provider, deps)
    case 'vertex': return vertexPlatform(provider, deps)
    default: return vendorPlatform(provider)
  }
}

/** OpenTelemetry's gen_ai.provider.name of a provider's platform; null for the vendor's own API. */
export function platformTraceName (provider: Pick<ProviderConfig, 'platform'>): string | null {
  switch (provider.platform) {
    case 'azure': return 'azure.openai'
    case 'bedrock': return 'aws.bedrock'
    case 'vertex': return 'gcp.vertex_ai'
    default: return null
  }
}

/** Where a provider is reached: its base_url, or its platform's endpoint for its region (Bedrock) or location (Vertex AI). */
export function providerBaseUrl (provider: Pick<ProviderConfig, 'base_url' | 'platform' | 'region' | 'location'>): string {
  if (provider.base_url !== undefined) return provider.base_url
  if (provider.platform === 'bedrock') return `https://bedrock-runtime.${provider.region ?? 'us-east-1'}.amazonaws.com`
  if (provider.platform === 'vertex') return vertexBaseUrl(provider.location ?? 'global')
  return ''
}
