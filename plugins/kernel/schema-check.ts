import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'

// One validator (ajv) and one way of saying what is wrong, for everything checked against a JSON
// Schema (a TypeBox schema is one): the config file, every plugin's options, and the routes'
// params, query strings and bodies (Fastify's own ajv reports through `describeError`). A problem
// reads `<path>: <what>`, the path in the config's or the body's own terms:
// `models[3].pricing.input: must be >= 0`, `plugins[2].options.tag: is required`.

export interface CheckOptions {
  /** Fill in the schema's defaults (in place). */
  defaults?: boolean
  /** Take "8080" for 8080 and "true" for true where the schema asks for them (values that came through ${VAR}). */
  coerce?: boolean
  /** What an unknown property is called in a problem: a config `key` (default), a plugin's `option`. */
  noun?: string
}

const validators = new Map<string, Ajv>()
const compiled = new Map<string, WeakMap<object, ValidateFunction>>()

function ajvFor (defaults: boolean, coerce: boolean): Ajv {
  const k = `${String(defaults)}:${String(coerce)}`
  let ajv = validators.get(k)
  if (ajv === undefined) {
    ajv = new Ajv({ useDefaults: defaults, coerceTypes: coerce, allErrors: true, strict: false, verbose: true })
    validators.set(k, ajv)
  }
  return ajv
}

/** `/a/0/b` under `base` → `base.a[0].b` (or `a[0].b` with no base). */
export function pathOf (base: string, pointer: string): string {
  let out = base
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    out += /^\d+$/.test(part) ? `[${part}]` : (out === '' ? part : `.${part}`)
  }
  return out === '' ? '(root)' : out
}

const TYPE_NAMES: Record<string, string> = { string: 'a string', number: 'a number', integer: 'an integer', boolean: 'a boolean', object: 'an object', array: 'an array', null: 'null' }

/** What the branches of a union accept, in words: `one of "a", "b"`, or `a string or an object`. */
function unionWords (branches: unknown[]): string | undefined {
  const consts = branches.map((b) => (b as { const?: unknown }).const)
  if (consts.every((c) => c !== undefined)) return `one of ${consts.map((c) => JSON.stringify(c)).join(', ')}`
  const types = branches.map((b) => (b as { type?: unknown }).type).filter((t): t is string => typeof t === 'string')
  if (types.length === branches.length) return [...new Set(types)].map((t) => TYPE_NAMES[t] ?? t).join(' or ')
  return undefined
}

/** One ajv error as `{where, what}`: the pointer below the error's own path it is about, and what is wrong there. */
export function describeError (e: ErrorObject, noun = 'key'): { where: string, what: string } {
  const p = e.params as Record<string, unknown>
  const parent = e.parentSchema as { description?: unknown } | undefined
  switch (e.keyword) {
    case 'required': return { where: `/${String(p.missingProperty)}`, what: 'is required' }
    case 'additionalProperties': return { where: `/${String(p.additionalProperty)}`, what: `is not a known ${noun}` }
    case 'type': return { where: '', what: `must be ${String(p.type).split(',').map((t) => TYPE_NAMES[t] ?? t).join(' or ')}` }
    case 'minimum': return { where: '', what: `must be >= ${String(p.limit)}` }
    case 'exclusiveMinimum': return { where: '', what: `must be > ${String(p.limit)}` }
    case 'maximum': return { where: '', what: `must be <= ${String(p.limit)}` }
    case 'exclusiveMaximum': return { where: '', what: `must be < ${String(p.limit)}` }
    case 'minItems': return { where: '', what: p.limit === 1 ? 'must not be empty' : `must have at least ${String(p.limit)} items` }
    case 'maxItems': return { where: '', what: `must have at most ${String(p.limit)} items` }
    case 'minLength': return { where: '', what: p.limit === 1 ? 'must not be empty' : `must be at least ${String(p.limit)} characters` }
    case 'maxLength': return { where: '', what: `must be at most ${String(p.limit)} characters` }
    case 'enum': return { where: '', what: `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}` }
    case 'const': return { where: '', what: `must be ${JSON.stringify(p.allowedValue)}` }
    case 'pattern': return { where: '', what: typeof parent?.description === 'string' ? `must be ${parent.description}` : `must match ${String(p.pattern)}` }
    case 'anyOf': case 'oneOf': {
      const words = typeof parent?.description === 'string' ? parent.description : unionWords(Array.isArray(e.schema) ? e.schema : [])
      return { where: '', what: words === undefined ? 'is not any of the forms it may take' : `must be ${words}` }
    }
    default: return { where: '', what: e.message ?? 'is not valid' }
  }
}

/** One problem: where (in the value's own terms), what is wrong there, and whether it is a missing field. */
export interface Problem { path: string, what: string, missing: boolean }

/**
 * The problems of a list of ajv errors, one per path. A union that failed is said once, in its
 * own words, when the value fits none of its branches' types ("must be a string or an array");
 * when it fits one and fails inside it, what failed inside is said instead (`limits.rpm: must be
 * >= 1` rather than "limits: must be an object or null").
 */
export function problemList (errors: readonly ErrorObject[], base: string, noun = 'key'): Problem[] {
  const isUnion = (e: ErrorObject): boolean => e.keyword === 'anyOf' || e.keyword === 'oneOf'
  const under = (e: ErrorObject, at: string): boolean => e.instancePath === at || e.instancePath.startsWith(`${at}/`)
  // a branch error that is more than "not this branch's form" at the union's own place (a union
  // that describes its forms in words keeps its words for anything at its own place)
  const inside = (e: ErrorObject, u: ErrorObject): boolean => {
    if (!under(e, u.instancePath) || isUnion(e)) return false
    if (e.instancePath !== u.instancePath) return true
    const described = typeof (u.parentSchema as { description?: unknown } | undefined)?.description === 'string'
    return !described && !['type', 'const', 'enum'].includes(e.keyword)
  }
  const unions = errors.filter(isUnion)
  const said = new Set(unions.filter((u) => errors.some((e) => inside(e, u))))
  const seen = new Set<string>()
  const out: Problem[] = []
  for (const e of errors) {
    if (isUnion(e) && said.has(e)) continue
    if (!isUnion(e) && unions.some((u) => under(e, u.instancePath) && !(said.has(u) && inside(e, u)))) continue
    const { where, what } = describeError(e, noun)
    const path = pathOf(base, e.instancePath + where)
    if (seen.has(path)) continue
    seen.add(path)
    out.push({ path, what, missing: e.keyword === 'required' })
  }
  return out
}

/** The problems of a list of ajv errors as lines: `<path>: <what>`. */
export function problemsOf (errors: readonly ErrorObject[], base: string, noun = 'key'): string[] {
  return problemList(errors, base, noun).map((p) => `${p.path}: ${p.what}`)
}

/**
 * Checks `value` against `schema` (defaults filled in and values coerced in place, as asked) and
 * returns its problems, each as `<base>.<path>: <what>`; none when it is valid. A schema ajv
 * cannot compile is a problem of its own.
 */
export function checkSchema (schema: object, value: unknown, base: string, opts: CheckOptions = {}): string[] {
  const defaults = opts.defaults ?? true
  const coerce = opts.coerce ?? false
  const k = `${String(defaults)}:${String(coerce)}`
  let byKind = compiled.get(k)
  if (byKind === undefined) { byKind = new WeakMap(); compiled.set(k, byKind) }
  let validate = byKind.get(schema)
  if (validate === undefined) {
    try {
      validate = ajvFor(defaults, coerce).compile(schema)
    } catch (err) {
      return [`${base === '' ? '(root)' : base}: the schema is not valid JSON Schema: ${(err as Error).message}`]
    }
    byKind.set(schema, validate)
  }
  if (validate(value)) return []
  return problemsOf(validate.errors ?? [], base, opts.noun)
}

const strictCompiled = new WeakMap<object, ValidateFunction>()

/** The first problem of `value` against `schema` (nothing is changed or coerced); null when it is valid. */
export function firstProblem (schema: object, value: unknown): Problem | null {
  let validate = strictCompiled.get(schema)
  if (validate === undefined) {
    validate = ajvFor(false, false).compile(schema)
    strictCompiled.set(schema, validate)
  }
  if (validate(value)) return null
  return problemList(validate.errors ?? [], '')[0] ?? { path: '(root)', what: 'is not valid', missing: false }
}
