import t from 'tap'
import type { Ajv } from 'ajv'
import { finiteNumbers } from '../../routes/schemas.js'
import { sharedValidators } from '../../engine/host/validators.js'
import { build } from '../helper.js'

// The route schemas are compiled once a process (engine/host/validators.ts): every app built with
// the same Ajv options shares one compiler, each schema object is compiled once, and what the
// validators do is Fastify's default compiler's (coercion, defaults, extra fields removed, and
// the `finite` keyword buildApp adds).

type Compile = (route: { schema: object, method: string, url: string, httpPart: string }) => ((data: unknown) => boolean) & { errors?: unknown }
const OPTIONS = { customOptions: { verbose: true }, plugins: [finiteNumbers] }
const route = (schema: object): { schema: object, method: string, url: string, httpPart: string } => ({ schema, method: 'POST', url: '/x', httpPart: 'body' })

t.test('one compiled validator for a schema object, across apps', async (t) => {
  const first = sharedValidators({}, OPTIONS) as unknown as Compile
  const second = sharedValidators({}, OPTIONS) as unknown as Compile
  const schema = { type: 'object', properties: { n: { type: 'integer', finite: true }, d: { type: 'string', default: 'x' } }, additionalProperties: false }
  const v = first(route(schema))
  t.equal(second(route(schema)), v, 'the second app gets the first one\'s validator')
  const twin = second(route(JSON.parse(JSON.stringify(schema)) as object))
  t.not(twin, v, 'another object with the same content is compiled on its own')
  // Fastify's defaults: types coerced, defaults filled, extra fields removed
  const body: Record<string, unknown> = { n: '5', extra: true }
  t.ok(v(body))
  t.same(body, { n: 5, d: 'x' })
  t.notOk(v({ n: 1.5 }), 'a non-integer is refused')
  t.notOk(first(route({ type: 'number', finite: true }))(Infinity), 'the finite keyword is there')
})

t.test('a compiled schema leaves Ajv\'s cache', async (t) => {
  let ajv: Ajv | undefined
  // options of their own: a compiler (and an Ajv) of their own in the pool
  const compile = sharedValidators({}, { ...OPTIONS, customOptions: { verbose: true, messages: true }, onCreate: (a: Ajv) => { ajv = a } }) as unknown as Compile
  const plain = { type: 'object', properties: { a: { type: 'string' } } }
  compile(route(plain))
  t.ok(ajv !== undefined)
  t.equal((ajv as unknown as { _cache: Map<unknown, unknown> })._cache.has(plain), false, 'no strong reference kept to a schema made for one app')
  // one with an $id is left there (another schema's $ref may name it), and still compiled once
  const named = { $id: 'https://modelgate.test/item', type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }
  const v = compile(route(named))
  t.equal(compile(route(named)), v)
  t.ok(v({ id: 'a' }))
  t.notOk(v({}))
})

t.test('apps built one after another validate their routes alike', async (t) => {
  for (let i = 0; i < 2; i++) {
    const app = await build(t)
    const bad = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: 'Bearer x', 'content-type': 'application/json' }, payload: { model: 'm', messages: 'not a list', stream: 'true' } })
    t.equal(bad.statusCode < 500 && bad.statusCode >= 400, true, `app ${i + 1}: a malformed body is a 4xx (${bad.statusCode})`)
    const models = await app.inject({ method: 'GET', url: '/admin/v1/usage?limit=Infinity', headers: { authorization: 'Bearer x' } })
    t.equal(models.statusCode >= 400 && models.statusCode < 500, true, `app ${i + 1}: a query out of its schema is a 4xx (${models.statusCode})`)
  }
})
