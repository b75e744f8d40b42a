import t from 'tap'
import { pairFor } from '../../engine/translation/index.js'
import { CHAT_FIELDS } from '../../engine/protocols/chat/table.js'
import { GEMINI_FIELDS, GEMINI_GENERATION_FIELDS, GEMINI_THINKING_FIELDS } from '../../engine/protocols/gemini/table.js'
import { MESSAGES_FIELDS } from '../../engine/protocols/messages/table.js'
import { RESPONSES_CONFIG_FIELDS, RESPONSES_FIELDS } from '../../engine/protocols/responses/table.js'
import type { Json, Protocol, TranslateCtx, UpstreamProtocol } from '../../engine/translation/types.js'

// The field tables are what the pairs do: a field a protocol's table marks dropped toward an
// upstream is reported by that pair, a passed one reaches the upstream body as it is, an
// accepted one goes nowhere and is not reported, a refused one is a 400; no field is left out
// of a column, and a field no table knows is reported wherever it sits.

const CTX: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096 }
const PROBE = { probe: 1 } // no field's neutral value
const FATES = new Set(['mapped', 'passed', 'dropped', 'accepted', 'refused'])

// A value of the field's own type, where the reader checks it (else PROBE)
const VALUES: Record<string, unknown> = {
  stream: false,
  temperature: 0.5,
  top_p: 0.5,
  // Responses
  user: 'u-1',
  safety_identifier: 's-1',
  prompt_cache_key: 'k-1',
  metadata: { probe: '1' },
  'text.verbosity': 'low',
  store: true,
  client_metadata: { probe: '1' },
  stream_options: { include_obfuscation: false },
  previous_response_id: 'resp_1',
  conversation: 'conv_1',
  background: true,
  prompt: { id: 'pmpt_1' },
  truncation: 'auto',
  'reasoning.summary': 'auto',
  'reasoning.generate_summary': 'auto',
  'reasoning.context': 'all_turns',
  'reasoning.mode': 'pro',
  // Gemini
  cachedContent: 'cachedContents/c-1',
  'generationConfig.candidateCount': 2,
  'generationConfig.presencePenalty': 0.5,
  'generationConfig.frequencyPenalty': 0.5,
  'generationConfig.seed': 7
}

/** `base` with `value` at the dotted `path`. */
function withField (base: Json, path: string, value: unknown): Json {
  const body = structuredClone(base)
  const keys = path.split('.')
  let at = body
  for (const key of keys.slice(0, -1)) {
    at[key] = { ...(at[key] as Json | undefined) }
    at = at[key] as Json
  }
  at[keys[keys.length - 1] as string] = value
  return body
}

function check (client: Protocol, base: Json, table: Readonly<Record<string, Readonly<Record<string, string>>>>, upstreams: UpstreamProtocol[], prefix = ''): void {
  for (const up of upstreams) {
    t.test(`${client} → ${up}${prefix === '' ? '' : ` (${prefix.slice(0, -1)})`}`, async (t) => {
      const request = (path: string, value: unknown) => pairFor(client, up).request(withField(base, path, value), CTX)
      for (const [field, fates] of Object.entries(table)) {
        const fate = fates[up] as string
        const path = prefix + field
        t.ok(FATES.has(fate), `${path} has a fate toward ${up}`)
        if (fate === 'mapped') continue
        const value = Object.hasOwn(VALUES, path) ? VALUES[path] : PROBE
        if (fate === 'refused') {
          let status: unknown
          try { request(path, value) } catch (err) { status = (err as { statusCode?: unknown }).statusCode }
          t.equal(status, 400, `${path} is refused toward ${up}`)
          continue
        }
        const r = request(path, value)
        if (fate === 'dropped') t.ok(r.dropped.includes(path), `${path} is reported dropped toward ${up}`)
        else if (fate === 'passed') t.ok(Object.hasOwn(r.body, field), `${path} is passed to ${up}`)
        else {
          t.notOk(r.dropped.includes(path), `${path} is accepted toward ${up}, not reported`)
          t.notOk(prefix === '' && Object.hasOwn(r.body, field), `${path} is accepted toward ${up}, not sent`)
        }
      }
      // a field the table does not know
      const unknown = `${prefix}probe_unknown`
      t.ok(request(unknown, PROBE).dropped.includes(unknown), `${unknown} is reported dropped toward ${up}`)
    })
  }
}

const RESPONSES_BASE = { model: 'm', input: 'hi' }
const GEMINI_BASE = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }

check('openai', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, CHAT_FIELDS, ['messages', 'gemini'])
check('messages', { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, MESSAGES_FIELDS, ['openai', 'gemini', 'converse'])
check('responses', RESPONSES_BASE, RESPONSES_FIELDS, ['openai', 'messages', 'gemini'])
const textAndReasoning = (name: string): Record<string, Readonly<Record<string, string>>> =>
  Object.fromEntries(Object.entries(RESPONSES_CONFIG_FIELDS).filter(([k]) => k.startsWith(`${name}.`)).map(([k, v]) => [k.slice(name.length + 1), v]))
check('responses', RESPONSES_BASE, textAndReasoning('text'), ['openai', 'messages', 'gemini'], 'text.')
check('responses', RESPONSES_BASE, textAndReasoning('reasoning'), ['openai', 'messages', 'gemini'], 'reasoning.')
check('gemini', GEMINI_BASE, GEMINI_FIELDS, ['openai', 'messages'])
check('gemini', GEMINI_BASE, GEMINI_GENERATION_FIELDS, ['openai', 'messages'], 'generationConfig.')
check('gemini', GEMINI_BASE, GEMINI_THINKING_FIELDS, ['openai', 'messages'], 'generationConfig.thinkingConfig.')

t.test('every key of text and reasoning has a row', async (t) => {
  for (const key of Object.keys(RESPONSES_CONFIG_FIELDS)) t.match(key, /^(text|reasoning)\./)
})

t.test('a Responses summary asked for by its older name, generate_summary, is Gemini thought summaries', async (t) => {
  for (const name of ['summary', 'generate_summary']) {
    const r = pairFor('responses', 'gemini').request({ ...RESPONSES_BASE, reasoning: { effort: 'low', [name]: 'auto' } }, CTX)
    t.same((r.body.generationConfig as Json).thinkingConfig, { thinkingBudget: 1024, includeThoughts: true }, name)
  }
})

t.test('a Gemini penalty of 0 asks for nothing a Messages upstream lacks', async (t) => {
  const r = pairFor('gemini', 'messages').request({ ...GEMINI_BASE, generationConfig: { presencePenalty: 0, frequencyPenalty: 0, seed: 1 } }, CTX)
  t.same(r.dropped, ['generationConfig.seed'])
})
