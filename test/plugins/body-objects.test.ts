import t from 'tap'
import type { Config } from '../../config/schema.js'
import { BodyObjects, reachableProviders, topLevelObjects } from '../../engine/gateway/body-objects.js'
import { referencesIn } from '../../engine/gateway/provider-objects.js'
import type { Store } from '../../engine/store/types.js'
import { testConfig } from '../helper.js'

// The objects a body names (engine/gateway/body-objects.ts, and the fields pass-through reads in
// provider-objects.ts), and which providers a call naming them may go to, on a store that answers
// at once (SQLite) and on one that answers later (PostgreSQL).

const config: Readonly<Config> = testConfig({
  providers: [
    { id: 'oa', protocol: 'openai', base_url: 'https://api.example.com/v1', api_key: 'k', passthrough: true },
    { id: 'oa-native', protocol: 'openai', base_url: 'https://api.example.com/v1', api_key: 'k', responses: true, passthrough: true },
    { id: 'an', protocol: 'messages', base_url: 'https://anthropic.example.com', api_key: 'k', passthrough: true },
    { id: 'gm', protocol: 'gemini', base_url: 'https://gemini-proxy.example.com/gemini', api_key: 'k', passthrough: true },
    { id: 'gm-shared', protocol: 'gemini', base_url: 'https://generativelanguage.googleapis.com', api_key: 'k', passthrough: true, passthrough_shared: true }
  ],
  models: []
})

/** A store whose organization `acme` made `made` at each provider; `later`: it answers with promises. */
function storeOf (made: Record<string, string[]>, later = false): { store: Store, lookups: () => number } {
  let lookups = 0
  const owned = (provider: string, org: string, ids: readonly string[]): Set<string> => {
    lookups++
    return new Set(org === 'acme' ? ids.filter((id) => made[provider]?.includes(id) === true) : [])
  }
  const objects = { owned: later ? async (p: string, o: string, ids: readonly string[]) => owned(p, o, ids) : owned }
  return { store: { objects } as unknown as Store, lookups: () => lookups }
}

const reach = async (objects: BodyObjects, providers: string[], org: string | null, made: Record<string, string[]>, later = false): Promise<readonly string[] | string> => {
  try {
    return await reachableProviders(config, storeOf(made, later).store, org, providers, objects)
  } catch (err) {
    return (err as { key: string }).key
  }
}

const named = (client: 'openai' | 'messages' | 'responses' | 'gemini', fill: (o: BodyObjects) => void): BodyObjects => {
  const o = new BodyObjects(client)
  fill(o)
  return o
}

t.test('pass-through reads these fields as references too', async (t) => {
  t.same(referencesIn('openai', { input: [{ type: 'code_interpreter_call', container_id: 'cntr_1' }] }, []), [{ kind: 'containers', id: 'cntr_1' }], 'a container by container_id')
  t.same(referencesIn('openai', { prompt: { id: 'pmpt_1', variables: { doc: { type: 'input_file', file_id: 'file-1' } } } }, []), [{ kind: 'prompts', id: 'pmpt_1' }, { kind: 'files', id: 'file-1' }], 'a stored prompt, and what its variables name')
  t.same(referencesIn('openai', { model: 'gpt-image-1', prompt: 'a lighthouse' }, []), [], 'a prompt that is text names nothing')
  t.same(referencesIn('openai', { messages: [{ role: 'assistant', audio: { id: 'audio_1' } }], audio: { voice: 'alloy', format: 'wav' } }, []), [{ kind: 'audio', id: 'audio_1' }], 'an earlier answer\'s audio; the audio settings name nothing')
  t.same(referencesIn('messages', { container: { skills: [{ type: 'custom', skill_id: 'skill_01' }, { type: 'anthropic', skill_id: 'pptx' }] } }, []), [{ kind: 'skills', id: 'skill_01' }], 'a custom skill, not one of Anthropic\'s')
  const hosts = ['generativelanguage.googleapis.com']
  const part = (fileUri: string): Record<string, unknown> => ({ contents: [{ parts: [{ fileData: { fileUri } }] }] })
  t.same(referencesIn('gemini', part('https://generativelanguage.googleapis.com/v1beta/files/abc:download?alt=media'), hosts), [{ kind: 'files', id: 'files/abc' }])
  for (const odd of ['https://generativelanguage.googleapis.com/v1beta/%66iles/abc', 'https://generativelanguage.googleapis.com/v1beta/files/mine/../files/abc', 'files/abc/../def']) {
    t.same(referencesIn('gemini', part(odd), hosts), [{ kind: 'files', id: odd }], `${odd}: not plainly a file's name, so no organization's`)
  }
  t.same(referencesIn('gemini', part('https://example.com/files/abc'), hosts), [], 'media on another host')
})

t.test('the top level: tools that are not the client\'s own functions, and fields the gateway does not know', async (t) => {
  const chat = new BodyObjects('openai')
  topLevelObjects({
    model: 'm',
    temperature: 0.2,
    response_format: { type: 'json_schema', json_schema: { schema: { properties: { file_id: { type: 'string' } } } } },
    tools: [{ type: 'function', function: { name: 'f', parameters: { properties: { file_id: { type: 'string', default: 'file-x' } } } } }, { type: 'x_search', vector_store_ids: ['vs_1'] }],
    extra: { file_ids: ['file-1'] }
  }, chat)
  t.same(chat.ids, ['vs_1', 'file-1'], 'a settings field and a function\'s schema are not read')
  const messages = new BodyObjects('messages')
  topLevelObjects({ tools: [{ name: 'f', input_schema: { properties: { container: { id: 'not-one' } } } }], container: 'cntr_1' }, messages)
  t.same(messages.ids, ['cntr_1'], 'a Messages custom tool is the client\'s; its container is a reference')
  const gemini = new BodyObjects('gemini')
  topLevelObjects({ cachedContent: 'cachedContents/c1', tools: [{ functionDeclarations: [{ name: 'f', parameters: { properties: { fileUri: { type: 'string' } } } }] }, { file_search: { file_search_store_names: ['fileSearchStores/s1'] } }] }, gemini)
  t.same(gemini.ids, ['cachedContents/c1', 'fileSearchStores/s1'])
  const odd = new BodyObjects('messages')
  odd.id({ id: 'x' }, 'messages[0].content[0].source.file_id')
  odd.idList('vs_1', 'tools[0].vector_store_ids')
  t.same(odd.unreadable, ['messages[0].content[0].source.file_id', 'tools[0].vector_store_ids'], 'a value that is no id cannot be read')
})

t.test('a body that names nothing: the same providers, no lookup', async (t) => {
  const providers = ['oa', 'an']
  const { store, lookups } = storeOf({})
  t.equal(reachableProviders(config, store, 'acme', providers, new BodyObjects('openai')), providers)
  const media = named('openai', (o) => { o.url('https://example.com/a.png', 'x') })
  t.same(reachableProviders(config, store, 'acme', ['oa', 'gm'], media), ['oa', 'gm'], 'a media URL on another host names nothing')
  t.equal(lookups(), 0)
})

for (const later of [false, true]) {
  const store = later ? 'a store that answers later' : 'a store that answers at once'
  t.test(`${store}: ids are read by the providers of the client's protocol`, async (t) => {
    const file = named('openai', (o) => { o.id('file-1', 'f') })
    t.same(await reach(file, ['oa', 'an', 'gm'], 'acme', { oa: ['file-1'] }, later), ['oa', 'an', 'gm'], 'made at the OpenAI provider: every provider (the others never read it)')
    t.same(await reach(file, ['oa', 'oa-native', 'an'], 'acme', { 'oa-native': ['file-1'] }, later), ['oa-native', 'an'], 'made at one OpenAI account: the other is left out')
    t.equal(await reach(file, ['oa', 'oa-native'], 'acme', {}, later), 'object_not_found', 'made at none')
    t.equal(await reach(file, ['oa'], 'rival', { oa: ['file-1'] }, later), 'object_not_found', 'another organization\'s')
    t.equal(await reach(file, ['oa'], null, { oa: ['file-1'] }, later), 'object_not_found', 'no key: no one\'s')
    const responses = named('responses', (o) => { o.id('file-1', 'f') })
    t.same(await reach(responses, ['oa', 'oa-native'], 'acme', {}, later), ['oa'], 'a Responses id: read only where Responses is served itself')
    const unreadable = named('messages', (o) => { o.cannotRead('messages[0].content[0].source.type') })
    t.equal(await reach(unreadable, ['an'], 'acme', {}, later), 'unreadable_reference')
    t.same(await reach(unreadable, ['an', 'oa'], 'acme', {}, later), ['oa'], 'refused only where it would be read')
    t.same(await reach(named('messages', (o) => { o.id('file_1', 'f'); o.cannotRead('g') }), ['an', 'oa'], 'acme', {}, later), ['oa'], 'a provider the call is translated for is left')
  })

  t.test(`${store}: a Files API URI names a file at the Gemini providers of its host`, async (t) => {
    const uri = (u: string): BodyObjects => named('openai', (o) => { o.url(u, 'messages[0].content[1].image_url') })
    const made = { gm: ['files/abc'] }
    for (const u of ['https://generativelanguage.googleapis.com/v1beta/files/abc', 'https://generativelanguage.googleapis.com/v1beta/files/abc:download?alt=media', 'https://GenerativeLanguage.googleapis.com./v1beta/files/abc', 'https://gemini-proxy.example.com/gemini/v1beta/files/abc']) {
      t.same(await reach(uri(u), ['gm', 'oa'], 'acme', made, later), ['gm', 'oa'], `${u}: acme's`)
      t.same(await reach(uri(u), ['gm', 'oa'], 'rival', made, later), ['oa'], `${u}: not rival's (the OpenAI provider fetches a URL)`)
      t.equal(await reach(uri(u), ['gm'], 'rival', made, later), 'object_not_found')
    }
    for (const u of ['https://generativelanguage.googleapis.com/v1beta/%66iles/abc', 'https://generativelanguage.googleapis.com/v1beta/files/x/../abc', 'https://generativelanguage.googleapis.com/v1beta/files/abc/', 'https://generativelanguage.googleapis.com/v1beta/cachedContents/abc']) {
      t.equal(await reach(uri(u), ['gm'], 'acme', made, later), 'unreadable_reference', `${u}: not plainly a file URI`)
    }
    t.same(await reach(uri('https://generativelanguage.googleapis.com/v1beta/files/zzz'), ['gm', 'gm-shared'], 'rival', made, later), ['gm-shared'], 'a provider whose objects are shared takes it')
    t.same(await reach(uri('https://gemini-proxy.example.com/gemini/v1beta/files/zzz'), ['gm-shared'], 'rival', made, later), ['gm-shared'], 'another provider\'s host: media there')
  })
}
