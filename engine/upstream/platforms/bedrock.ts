import type { ProviderConfig } from '../../../config/schema.js'
import type { Platform, PlatformDeps } from './types.js'

// AWS Bedrock: Converse and InvokeModel, signed with Signature Version 4. NOT BUILT YET on this
// branch: the `bedrock` branch fills this module (URLs, SigV4 of the final body, the event-stream
// framing, Bedrock's error bodies). Until then a bedrock provider is refused when the gateway
// starts, with this message, rather than sent calls it cannot make.

export function bedrockPlatform (provider: ProviderConfig, _deps: PlatformDeps): Platform {
  throw new Error(`provider ${provider.id}: platform bedrock is not built in this version of the gateway`)
}
