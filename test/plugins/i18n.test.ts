import t from 'tap'
import { en } from '../../engine/kernel/i18n/en.js'
import { CATALOGS, LOCALES, localize, negotiateLocale } from '../../engine/kernel/i18n/index.js'
import { bearer, build, KEY_A } from '../helper.js'

const placeholders = (s: string): string[] => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string).sort()

t.test('every locale has every English message, no more, with the same placeholders', async (t) => {
  t.same(LOCALES.sort(), ['de', 'en', 'es', 'fr', 'ja', 'ko', 'pt-BR', 'zh-CN', 'zh-TW'])
  for (const locale of LOCALES) {
    const catalog = CATALOGS[locale] as Record<string, string>
    t.same(Object.keys(catalog).sort(), Object.keys(en).sort(), `${locale}: the same keys as English`)
    for (const [key, english] of Object.entries(en)) {
      t.type(catalog[key], 'string', `${locale}.${key}`)
      t.same(placeholders(catalog[key] ?? ''), placeholders(english), `${locale}.${key}: placeholders kept`)
      if (locale !== 'en') t.not(catalog[key], english, `${locale}.${key} is translated`)
    }
  }
})

t.test('negotiation: X-Locale first, then Accept-Language by q-value, then English', async (t) => {
  const cases: Array<[string | undefined, string | undefined, string]> = [
    ['ja', 'fr', 'ja'],
    ['xx', 'fr-CA,en;q=0.5', 'fr'],
    [undefined, 'de;q=0.2, ko;q=0.9, es;q=0.5', 'ko'],
    [undefined, 'zh-Hant-TW', 'zh-TW'],
    [undefined, 'zh-HK', 'zh-TW'],
    [undefined, 'zh', 'zh-CN'],
    [undefined, 'pt-PT', 'pt-BR'],
    [undefined, 'pt', 'pt-BR'],
    [undefined, 'sv, *;q=0.1', 'en'],
    [undefined, 'fr;q=0, de', 'de'],
    [undefined, ';;;,,q=abc', 'en'],
    ['ZH-tw', undefined, 'zh-TW'],
    [undefined, undefined, 'en']
  ]
  for (const [x, accept, want] of cases) t.equal(negotiateLocale(x, accept), want, `${String(x)} / ${String(accept)}`)
})

t.test('each locale renders the errors of a real request; codes and types stay English', async (t) => {
  const app = await build(t)
  for (const locale of LOCALES) {
    const res = await app.inject({ method: 'GET', url: '/v1/models/none/such', headers: { ...bearer(KEY_A), 'x-locale': locale } })
    t.equal(res.statusCode, 404)
    t.equal(res.json().error.code, 'model_not_found')
    t.equal(res.json().error.message, localize(locale, 'model_not_found', { model: 'none/such' }), locale)
    const m = await app.inject({ method: 'POST', url: '/v1/messages', headers: { 'accept-language': `${locale};q=0.9, en;q=0.1` }, payload: {} })
    t.equal(m.json().error.type, 'authentication_error')
    t.equal(m.json().error.message, localize(locale, 'unauthorized', {}), `${locale} via Accept-Language`)
  }
})

t.test('tags that name Object.prototype properties are unknown locales, never a crash', async (t) => {
  const TAGS = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__', 'constructor-x', 'toString-zh']
  for (const tag of TAGS) {
    t.equal(negotiateLocale(tag, undefined), 'en', `X-Locale ${tag}`)
    t.equal(negotiateLocale(undefined, `${tag}, fr;q=0.5`), 'fr', `Accept-Language ${tag}`)
  }
  const app = await build(t, { admin: { token: 'admin-token-0123456789' } })
  const paths: Array<{ method: 'GET' | 'POST', url: string, status: number, family: 'openai' | 'messages', headers?: Record<string, string>, payload?: string }> = [
    { method: 'POST', url: '/v1/chat/completions', status: 401, family: 'openai' },
    { method: 'POST', url: '/v1/chat/completions', status: 400, family: 'openai', headers: bearer(KEY_A), payload: '{nope' },
    { method: 'POST', url: '/v1/chat/completions', status: 400, family: 'openai', headers: bearer(KEY_A), payload: '{"model":"demo/gpt"}' },
    { method: 'GET', url: '/v1/models/none/such', status: 404, family: 'openai', headers: bearer(KEY_A) },
    { method: 'GET', url: '/v1/no-such-route', status: 404, family: 'openai', headers: bearer(KEY_A) },
    { method: 'POST', url: '/v1/messages', status: 401, family: 'messages' },
    { method: 'POST', url: '/v1/messages', status: 400, family: 'messages', headers: { 'x-api-key': KEY_A }, payload: '[]' },
    { method: 'POST', url: '/v1/messages/count_tokens', status: 404, family: 'messages', headers: { 'x-api-key': KEY_A }, payload: '{"model":"none","messages":[{"role":"user","content":"x"}]}' },
    { method: 'GET', url: '/admin/v1/orgs/acme', status: 401, family: 'openai' },
    { method: 'GET', url: '/admin/v1/orgs/nope', status: 404, family: 'openai', headers: bearer('admin-token-0123456789') },
    { method: 'GET', url: '/console/api/me', status: 401, family: 'openai' },
    { method: 'GET', url: '/console/api/usage?range=constructor', status: 400, family: 'openai', headers: bearer(KEY_A) },
    { method: 'GET', url: '/console/api/usage?range=toString', status: 400, family: 'openai', headers: bearer(KEY_A) }
  ]
  for (const tag of TAGS) {
    for (const headers of [{ 'x-locale': tag }, { 'accept-language': tag }, { 'accept-language': `${tag};q=0.9, ${tag}-x` }]) {
      for (const p of paths) {
        const res = await app.inject({ method: p.method, url: p.url, headers: { 'content-type': 'application/json', ...p.headers, ...headers }, payload: p.payload })
        const name = `${p.method} ${p.url} ${JSON.stringify(headers)}`
        t.equal(res.statusCode, p.status, name)
        const body = res.json()
        if (p.family === 'messages') {
          t.equal(body.type, 'error', name)
          t.type(body.error.type, 'string', name)
        } else {
          t.ok(typeof body.error.code === 'number' || typeof body.error.code === 'string', name)
          t.type(body.error.type, 'string', name)
        }
        t.type(body.error.message, 'string', name)
        t.notMatch(body.error.message, /^Internal error/, name)
      }
    }
  }
})
