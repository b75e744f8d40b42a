import { Hash } from '@smithy/hash-node'
import { HttpRequest } from '@smithy/protocol-http'
import { SignatureV4 } from '@smithy/signature-v4'

// AWS Signature Version 4 for Bedrock's calls, by AWS's own signer (@smithy/signature-v4): no
// cryptography of ours. The credentials are read when the provider is built (at start and at each
// reload): the provider's `aws` keys, else the environment's AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. A Bedrock API key is no signature: it goes as a
// Bearer token. Nothing here logs or names a credential.

export interface AwsKeys {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

/** How a Bedrock provider authenticates: SigV4 with keys, or a Bedrock API key as Bearer. */
export type BedrockAuth = { kind: 'sigv4', keys: AwsKeys, region: string } | { kind: 'bearer', apiKey: string }

/** A provider's `aws` section, else the environment's keys; null when neither has both halves of a key. */
export function awsKeys (aws: { access_key_id?: string, secret_access_key?: string, session_token?: string } | undefined, env: NodeJS.ProcessEnv = process.env): AwsKeys | null {
  const id = aws?.access_key_id ?? env.AWS_ACCESS_KEY_ID
  const secret = aws?.secret_access_key ?? env.AWS_SECRET_ACCESS_KEY
  if (id === undefined || id === '' || secret === undefined || secret === '') return null
  // a session token belongs to the keys it came with: the environment's only with the environment's keys
  const token = aws?.access_key_id !== undefined ? aws.session_token : env.AWS_SESSION_TOKEN
  return token === undefined || token === '' ? { accessKeyId: id, secretAccessKey: secret } : { accessKeyId: id, secretAccessKey: secret, sessionToken: token }
}

export interface SignableCall {
  method: string
  url: URL
  /** The headers the call will carry (lower-case names); the signature covers them. */
  headers: Record<string, string>
  body: string | Uint8Array
}

/** A signer for one provider: the headers to add to a call (Authorization, X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token). */
export function bedrockSigner (auth: BedrockAuth): (call: SignableCall, now?: Date) => Promise<Record<string, string>> {
  if (auth.kind === 'bearer') {
    const headers = { authorization: `Bearer ${auth.apiKey}` }
    return async () => headers
  }
  const signer = new SignatureV4({ service: 'bedrock', region: auth.region, credentials: auth.keys, sha256: Hash.bind(null, 'sha256'), uriEscapePath: true })
  return async (call, now) => {
    const request = new HttpRequest({
      method: call.method,
      protocol: call.url.protocol,
      hostname: call.url.hostname,
      port: call.url.port === '' ? undefined : Number(call.url.port),
      path: call.url.pathname,
      query: Object.fromEntries(call.url.searchParams),
      // host is signed as the call sends it (with a port other than the scheme's)
      headers: { ...call.headers, host: call.url.host },
      body: call.body
    })
    const signed = await signer.sign(request, now === undefined ? undefined : { signingDate: now })
    const out: Record<string, string> = {}
    for (const [name, value] of Object.entries(signed.headers)) {
      const lower = name.toLowerCase()
      if (lower === 'authorization' || lower.startsWith('x-amz-')) out[lower] = value
    }
    return out
  }
}
