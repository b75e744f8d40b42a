import t from 'tap'
import { pairFor } from '../../plugins/translation/index.js'
import { CHAT_FIELDS } from '../../plugins/translation/tables/chat.js'
import { MESSAGES_FIELDS } from '../../plugins/translation/tables/messages.js'
import type { Json, Protocol, TranslateCtx } from '../../plugins/translation/types.js'

// The field tables are what the pairs do: a field a protocol's table marks dropped toward an
// upstream is reported by that pair, a passed one reaches the upstream body as it is, and no
// field is left out of a column.

const CTX: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096 }
const PROBE = { probe: 1 } // no field's neutral value

function check (client: Protocol, base: Json, table: Readonly<Record<string, Readonly<Record<string, string>>>>, upstreams: Protocol[]): void {
  for (const up of upstreams) {
    t.test(`${client} → ${up}`, async (t) => {
      for (const [field, fates] of Object.entries(table)) {
        const fate = fates[up]
        t.ok(fate === 'mapped' || fate === 'passed' || fate === 'dropped', `${field} has a fate toward ${up}`)
        if (fate === 'mapped') continue
        const r = pairFor(client, up).request({ ...base, [field]: field === 'stream' ? false : field === 'temperature' || field === 'top_p' ? 0.5 : PROBE }, CTX)
        if (fate === 'dropped') t.ok(r.dropped.includes(field), `${field} is reported dropped toward ${up}`)
        else t.ok(Object.hasOwn(r.body, field), `${field} is passed to ${up}`)
      }
    })
  }
}

check('openai', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, CHAT_FIELDS, ['messages', 'gemini'])
check('messages', { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, MESSAGES_FIELDS, ['openai', 'gemini'])
