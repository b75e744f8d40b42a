import t from 'tap'
import fc from 'fast-check'
import { Hash } from '@smithy/hash-node'
import { HttpRequest } from '@smithy/protocol-http'
import { SignatureV4 } from '@smithy/signature-v4'
import { awsKeys, bedrockSigner, type AwsKeys, type SignableCall } from '../../engine/upstream/platforms/aws-sign.js'
import { modelSegment } from '../../engine/protocols/converse/index.js'
import { signingUrl } from '../../engine/upstream/platforms/bedrock.js'

// The gateway's SigV4 signer against AWS's own (@smithy/signature-v4, as the AWS SDKs sign): for
// each call, the same headers to the byte, Authorization's signature included.

const KEYS: AwsKeys = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' }
const NOW = new Date('2026-12-07T11:42:05.123Z')
const BODY = JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'Say twenty words.' }] }], inferenceConfig: { maxTokens: 64 } })

/** A call whose target is a whole URL (AWS's signer is given its protocol, host name and port). */
type UrlCall = SignableCall & { url: URL }

/** The headers AWS's signer adds to the same call. */
async function byAws (call: UrlCall, keys: AwsKeys, region: string, now: Date): Promise<Record<string, string>> {
  // a key repeated in the query keeps all its values
  const query: Record<string, string | string[]> = {}
  for (const [k, v] of call.url.searchParams) {
    const had = query[k]
    query[k] = had === undefined ? v : [...(Array.isArray(had) ? had : [had]), v]
  }
  const signer = new SignatureV4({ service: 'bedrock', region, credentials: keys, sha256: Hash.bind(null, 'sha256'), uriEscapePath: true })
  const signed = await signer.sign(new HttpRequest({
    method: call.method,
    protocol: call.url.protocol,
    hostname: call.url.hostname,
    port: call.url.port === '' ? undefined : Number(call.url.port),
    path: call.url.pathname,
    query,
    headers: { ...call.headers, host: call.url.host },
    body: call.body
  }), { signingDate: now })
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(signed.headers)) {
    const lower = name.toLowerCase()
    if (lower === 'authorization' || lower.startsWith('x-amz-')) out[lower] = value
  }
  return out
}

const call = (url: string, body: string | Uint8Array = BODY, method = 'POST'): UrlCall => ({ method, url: new URL(url), headers: { 'content-type': 'application/json' }, body })

t.test('the signature of a Converse call is AWS\'s own, headers and all', async (t) => {
  const sign = bedrockSigner({ kind: 'sigv4', keys: KEYS, region: 'us-east-1' })
  const c = call('https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-pro-v1%3A0/converse')
  const ours = sign(c, NOW)
  t.same(ours, await byAws(c, KEYS, 'us-east-1', NOW))
  t.same(Object.keys(ours).sort(), ['authorization', 'x-amz-content-sha256', 'x-amz-date'])
  t.equal(ours['x-amz-date'], '20261207T114205Z')
  t.match(ours.authorization, /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20261207\/us-east-1\/bedrock\/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/)
  t.same(sign(c, NOW), ours, 'the same call at the same second: the same signature')
  t.not(sign(c, new Date(NOW.getTime() + 86_400_000)).authorization, ours.authorization, 'a day later: another signing key')
})

t.test('a session token is sent and signed', async (t) => {
  const keys = { ...KEYS, sessionToken: 'FwoGZXIvYXdzEXAMPLE//token+with/slashes==' }
  const sign = bedrockSigner({ kind: 'sigv4', keys, region: 'eu-west-3' })
  const c = call('https://bedrock-runtime.eu-west-3.amazonaws.com/model/mistral.mistral-large-2402-v1%3A0/converse-stream')
  const ours = sign(c, NOW)
  t.equal(ours['x-amz-security-token'], keys.sessionToken)
  t.match(ours.authorization, /SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token,/)
  t.same(ours, await byAws(c, keys, 'eu-west-3', NOW))
})

t.test('model ids with `:` and `/`, encoded as the gateway sends them or raw as a client sent them', async (t) => {
  const sign = bedrockSigner({ kind: 'sigv4', keys: KEYS, region: 'us-west-2' })
  const arn = 'arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0'
  for (const url of [
    `https://bedrock-runtime.us-west-2.amazonaws.com/model/${modelSegment(arn)}/invoke-with-response-stream`,
    `https://bedrock-runtime.us-west-2.amazonaws.com/model/${modelSegment('us.anthropic.claude-3-7-sonnet-20250219-v1:0')}/invoke`,
    'https://bedrock-runtime.us-west-2.amazonaws.com/model/amazon.nova-lite-v1:0/converse',
    'https://bedrock-runtime.us-west-2.amazonaws.com/model/a(b)!c*d\'e~f/converse'
  ]) {
    const c = call(url)
    t.same(sign(c, NOW), await byAws(c, KEYS, 'us-west-2', NOW), url)
  }
})

t.test('the port in the host, a base path, a query, a byte body, a GET without one', async (t) => {
  const sign = bedrockSigner({ kind: 'sigv4', keys: KEYS, region: 'us-east-1' })
  const cases: UrlCall[] = [
    call('http://127.0.0.1:8443/model/amazon.nova-pro-v1%3A0/converse'),
    call('https://proxy.example.com:443/bedrock/model/amazon.nova-pro-v1%3A0/converse'),
    call('https://vpce-0abc.bedrock-runtime.us-east-1.vpce.amazonaws.com/model/m/count-tokens?b=2&a=1&a=0'),
    call('https://bedrock-runtime.us-east-1.amazonaws.com/async-invoke?maxResults=5&nextToken=a%2Bb%2Fc%3D%3D&statusEquals=InProgress&x=sp%20ace+plus&e='),
    call('https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke', new TextEncoder().encode('{"prompt":"héllo ✓"}')),
    { method: 'GET', url: new URL('https://bedrock-runtime.us-east-1.amazonaws.com/async-invoke/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Aasync-invoke%2Fabc'), headers: {}, body: '' }
  ]
  for (const c of cases) t.same(sign(c, NOW), await byAws(c, KEYS, 'us-east-1', NOW), `${c.method} ${c.url.href}`)
})

t.test('a Bedrock API key is a Bearer token, no signature', async (t) => {
  const sign = bedrockSigner({ kind: 'bearer', apiKey: 'ABSK-example' })
  t.same(sign(call('https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse'), NOW), { authorization: 'Bearer ABSK-example' })
})

t.test('the keys: the provider\'s, else the environment\'s, a session token only with its own keys', async (t) => {
  const env = { AWS_ACCESS_KEY_ID: 'AKIDENV', AWS_SECRET_ACCESS_KEY: 'env-secret', AWS_SESSION_TOKEN: 'env-token' }
  t.same(awsKeys(undefined, env), { accessKeyId: 'AKIDENV', secretAccessKey: 'env-secret', sessionToken: 'env-token' })
  t.same(awsKeys({ access_key_id: 'AKIDCFG', secret_access_key: 'cfg-secret' }, env), { accessKeyId: 'AKIDCFG', secretAccessKey: 'cfg-secret' })
  t.same(awsKeys({ access_key_id: 'AKIDCFG', secret_access_key: 'cfg-secret', session_token: 'cfg-token' }, env), { accessKeyId: 'AKIDCFG', secretAccessKey: 'cfg-secret', sessionToken: 'cfg-token' })
  t.equal(awsKeys(undefined, { AWS_ACCESS_KEY_ID: 'AKIDENV' }), null)
})

t.test('a plain path is signed without a URL parser, as URL would read it', async (t) => {
  const origin = new URL('http://127.0.0.1:8443/base')
  // paths of the characters a path may hold, dot segments and doubled slashes among them
  const piece = fc.constantFrom('model', 'a.b', '.', '..', '%2e', '%2E%2e', '', 'x%3Ay', "it's", 'a b', 'q?x=1', '~_-', '%zz', 'é', '|', '@:+')
  fc.assert(fc.property(fc.array(piece, { maxLength: 6 }), (pieces) => {
    const path = `/${pieces.join('/')}`
    const read = (f: () => SignableCall['url']): unknown[] => {
      try {
        const u = f()
        return [u.host, u.pathname, u.search, [...u.searchParams]]
      } catch (err) {
        return [(err as Error).name] // a path no URL can hold (`//@:+`, a host of nothing) fails the same way
      }
    }
    t.same(read(() => signingUrl(origin, path)), read(() => new URL(path, origin)), path)
  }), { numRuns: 400 })
  // and the signature made on it is AWS's own
  const sign = bedrockSigner({ kind: 'sigv4', keys: KEYS, region: 'us-east-1' })
  const path = `/base/model/${modelSegment('us.anthropic.claude-sonnet-4-5-20250929-v1:0')}/converse`
  const plain: SignableCall = { method: 'POST', url: signingUrl(origin, path), headers: { 'content-type': 'application/json' }, body: BODY }
  t.same(sign(plain, NOW), await byAws({ ...plain, url: new URL(path, origin) }, KEYS, 'us-east-1', NOW))
})
