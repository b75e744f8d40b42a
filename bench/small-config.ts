import { writeFileSync } from 'node:fs'

// The one-model gateway config that bench/cpu.ts, bench/profile.ts and bench/memory.ts run: the
// plugins named in `plugins` (comma-separated; the rate limit set out of reach), one
// OpenAI-protocol provider at `upstream`, one tenant with a balance and a quota that never run out.

export const ALL_PLUGINS = 'cors,rate-limit,auth,idempotency,quota,balance,usage,diagnostics'
export const BENCH_KEY = 'mg-bench-key-0123456789abcdef'

/**
 * Writes the config to `file` (the store in `db`) and returns `file`. `connections` sizes the
 * upstream pool (the provider default otherwise); `timeoutS` is the server's request timeout;
 * `limits` the key's rpm and tpm (a key with limits gets the rate-limit headers, unless
 * `limitHeaders` is false: the quota plugin's `rate_limit_headers`).
 */
export function writeSmallConfig (file: string, db: string, upstream: string, plugins: string, opts: { connections?: number, timeoutS?: number, limits?: { rpm?: number, tpm?: number }, limitHeaders?: boolean } = {}): string {
  const optionsOf = (name: string): Record<string, unknown> | undefined => {
    if (name === 'rate-limit') return { max: 1e9 }
    if (name === 'quota' && opts.limitHeaders === false) return { rate_limit_headers: false }
    return undefined
  }
  const list = plugins.split(',').filter(Boolean).map((name) => ({ name, ...(optionsOf(name) === undefined ? {} : { options: optionsOf(name) }) }))
  writeFileSync(file, JSON.stringify({
    server: { port: 0, ...(opts.timeoutS === undefined ? {} : { request_timeout_s: opts.timeoutS }) },
    store: { sqlite: db },
    plugins: list,
    providers: [{ id: 'u', protocol: 'openai', base_url: `${upstream}/v1`, api_key: 'x', passthrough: true, ...(opts.connections === undefined ? {} : { connections: opts.connections }) }],
    models: [{ id: 'b/o', name: 'b', provider: 'u', context_length: 1000, supported_parameters: ['max_tokens'], pricing: { input: 1, output: 2 } }],
    tenants: [{ org: 'o', balance_usd: 1000000, quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY, passthrough: ['u'], ...(opts.limits === undefined ? {} : { limits: opts.limits }) }] }] }]
  }))
  return file
}
