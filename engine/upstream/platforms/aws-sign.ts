import { hash } from 'node:crypto'
import aws4 from 'aws4'

// AWS Signature Version 4 for Bedrock's calls, by a signing library (aws4: the canonical request,
// the signing key and the signature's HMAC): no cryptography of ours. It signs synchronously and
// keeps each day's signing key: under half the CPU per call of AWS's own @smithy/signature-v4,
// against which the tests check its signatures (test/upstream/aws-sign.test.ts, and the mock
// Bedrock's check of every call). The credentials are read when the provider is built (at start
// and at each reload): the provider's `aws` keys, else the environment's AWS_ACCESS_KEY_ID,
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
  /** Where the call goes: a URL, or its parts as the call sends them (bedrock.ts's plain paths, read without a URL parser). */
  url: Pick<URL, 'host' | 'pathname' | 'search' | 'searchParams'>
  /** The headers the call will carry (lower-case names); the signature covers them. */
  headers: Record<string, string>
  body: string | Uint8Array
}

let stampSecond = -1
let stamp = ''
/** YYYYMMDD'T'HHMMSS'Z', the signature's time (X-Amz-Date), made once a second. */
const amzDate = (ms: number): string => {
  const second = Math.floor(ms / 1000)
  if (second !== stampSecond) {
    const iso = new Date(second * 1000).toISOString()
    stamp = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`
    stampSecond = second
  }
  return stamp
}

/** A signer for one provider: the headers to add to a call (Authorization, X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token). */
export function bedrockSigner (auth: BedrockAuth): (call: SignableCall, now?: Date) => Record<string, string> {
  if (auth.kind === 'bearer') {
    const headers = { authorization: `Bearer ${auth.apiKey}` }
    return () => headers
  }
  const { keys, region } = auth
  return (call, now) => {
    const date = amzDate(now === undefined ? Date.now() : now.getTime())
    // the payload's hash goes in X-Amz-Content-Sha256 (as AWS's SDKs send it), which the signer
    // takes for the payload's: the body itself is not given to it, so that it adds no header of
    // its own (a Content-Length, a default Content-Type) to what it signs
    const out: Record<string, string> = { 'x-amz-date': date, 'x-amz-content-sha256': hash('sha256', call.body, 'hex') }
    if (keys.sessionToken !== undefined) out['x-amz-security-token'] = keys.sessionToken
    const signed = aws4.sign({
      service: 'bedrock',
      region,
      method: call.method,
      // the path as sent, which the signer encodes again for the canonical request (a model id's
      // %3A signed as %253A); the query by its values (as URL reads them), in a form the signer
      // reads back the same
      path: call.url.search === '' ? call.url.pathname : `${call.url.pathname}?${call.url.searchParams.toString()}`,
      // host as the call sends it (with a port other than the scheme's)
      headers: { ...call.headers, host: call.url.host, ...out }
    }, keys)
    const authorization = signed.headers?.Authorization
    if (typeof authorization !== 'string') throw new Error('the SigV4 signer gave no Authorization header')
    out.authorization = authorization
    return out
  }
}
