import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { Script } from 'node:vm'
import type { Ajv, ErrorObject, Options, ValidateFunction } from 'ajv'

// One validator (ajv) and one way of saying what is wrong, for everything checked against a JSON
// Schema (a TypeBox schema is one): the config file, every plugin's options, and the routes'
// params, query strings and bodies (Fastify's own ajv reports through `describeError`). A problem
// reads `<path>: <what>`, the path in the config's or the body's own terms:
// `models[3].pricing.input: must be >= 0`, `plugins[2].options.tag: is required`.
//
// Compiling a schema as large as the config's takes ajv about half a second, so the build compiles
// the schemas it knows ahead (ajv's standalone code, `precompileSchemas`) and a process that finds
// one of them among those (by its JSON's digest) compiles nothing: ajv itself is loaded only for
// a schema the build did not see (a plugin from outside the project, a test's). V8's code for
// that module is kept beside it too (`compiledAheadCache`), as Node keeps none on its own before
// version 22: its 350 kB would otherwise be parsed and compiled again by every process.

export interface CheckOptions {
  /** Fill in the schema's defaults (in place). */
  defaults?: boolean
  /** Take "8080" for 8080 and "true" for true where the schema asks for them (values that came through ${VAR}). */
  coerce?: boolean
  /** What an unknown property is called in a problem: a config `key` (default), a plugin's `option`. */
  noun?: string
}

/** The options of the ajv that checks with `defaults` and `coerce`: the same ahead of time and at run time. */
export const ajvOptions = (defaults: boolean, coerce: boolean): Options =>
  ({ useDefaults: defaults, coerceTypes: coerce, allErrors: true, strict: false, verbose: true })

/** What a schema is known by among those compiled ahead: its checking options and its JSON's digest. */
export function schemaKey (schema: object, defaults: boolean, coerce: boolean): string {
  return `${defaults ? 'd' : '-'}${coerce ? 'c' : '-'}:${createHash('sha256').update(JSON.stringify(schema)).digest('base64url')}`
}

const require = createRequire(import.meta.url)
const validators = new Map<string, Ajv>()
const compiled = new Map<string, WeakMap<object, ValidateFunction>>()
type Table = Record<string, ValidateFunction | undefined>
let ahead: (() => Table) | null = null
let aheadTable: Table | null = null

/** The digest of the module's source that its V8 code was made from, which the code's own check does not cover (V8 compares lengths). */
const sourceDigest = (source: string): Buffer => createHash('sha256').update(source).digest()

/**
 * Runs the CommonJS module `file` (the validators compiled ahead) with V8's code from `cache`
 * when that was made from this very source; returns its exports and the script.
 */
function runAhead (file: string, cache?: Buffer): { table: Table, script: Script } {
  const source = readFileSync(file, 'utf8')
  const digest = sourceDigest(source)
  const cachedData = cache !== undefined && cache.subarray(0, digest.length).equals(digest) ? cache.subarray(digest.length) : undefined
  const script = new Script(`(function (module, exports, require) {${source}\n})`, { filename: file, cachedData })
  const module = { exports: {} as Table }
  ;(script.runInThisContext() as (m: unknown, e: unknown, r: unknown) => void)(module, module.exports, createRequire(file))
  return { table: module.exports, script }
}

/**
 * Where the validators compiled ahead are (a CommonJS module ajv's standalone code made, loaded
 * the first time a schema is checked, with V8's code for it from `${file}.v8` when that is
 * there); one that cannot be loaded is no error: schemas are then compiled as they come.
 */
export function useCompiledAhead (file: string): void {
  aheadTable = null
  ahead = () => {
    let cache: Buffer | undefined
    try { cache = readFileSync(`${file}.v8`) } catch {}
    return runAhead(file, cache).table
  }
}

/**
 * V8's code for the validators compiled ahead in `file` (what the build writes to `${file}.v8`):
 * each validator is run once first, so that the code of every one is in it.
 */
export function compiledAheadCache (file: string): Buffer {
  const { table, script } = runAhead(file)
  for (const validate of Object.values(table)) validate?.({})
  return Buffer.concat([sourceDigest(readFileSync(file, 'utf8')), script.createCachedData()])
}

function compiledAhead (schema: object, defaults: boolean, coerce: boolean): ValidateFunction | undefined {
  if (ahead === null) return undefined
  if (aheadTable === null) {
    try { aheadTable = ahead() } catch { aheadTable = {} }
  }
  return aheadTable[schemaKey(schema, defaults, coerce)]
}

function ajvFor (defaults: boolean, coerce: boolean, source = false): Ajv {
  const k = `${String(defaults)}:${String(coerce)}:${String(source)}`
  let ajv = validators.get(k)
  if (ajv === undefined) {
    const { Ajv } = require('ajv') as typeof import('ajv')
    ajv = new Ajv({ ...ajvOptions(defaults, coerce), ...(source ? { code: { source: true } } : {}) })
    validators.set(k, ajv)
  }
  return ajv
}

/** The validator of `schema` checking with `defaults` and `coerce`: compiled ahead, or now (once per schema object). */
function validatorOf (schema: object, defaults: boolean, coerce: boolean): ValidateFunction {
  const k = `${String(defaults)}:${String(coerce)}`
  let byKind = compiled.get(k)
  if (byKind === undefined) { byKind = new WeakMap(); compiled.set(k, byKind) }
  let validate = byKind.get(schema)
  if (validate === undefined) {
    validate = compiledAhead(schema, defaults, coerce) ?? ajvFor(defaults, coerce).compile(schema)
    byKind.set(schema, validate)
  }
  return validate
}

/**
 * The source of a CommonJS module exporting a validator for each of `schemas`, under its
 * `schemaKey` (ajv's standalone code): what the build writes, for `useCompiledAhead`.
 */
export function precompileSchemas (schemas: ReadonlyArray<{ schema: object, defaults: boolean, coerce: boolean }>): string {
  const standaloneCode = (require('ajv/dist/standalone') as typeof import('ajv/dist/standalone/index.js')).default
  const parts: string[] = []
  for (const defaults of [false, true]) {
    for (const coerce of [false, true]) {
      const ajv = ajvFor(defaults, coerce, true)
      const names: Record<string, string> = {}
      for (const s of schemas.filter((s) => s.defaults === defaults && s.coerce === coerce)) {
        const key = schemaKey(s.schema, defaults, coerce)
        if (ajv.getSchema(key) === undefined) ajv.addSchema(s.schema, key)
        names[key] = key
      }
      if (Object.keys(names).length === 0) continue
      // each set in a function of its own: one module's code, with its own names
      parts.push(`Object.assign(module.exports, (function () { const module = { exports: {} }; const exports = module.exports;\n${standaloneCode(ajv, names)}\nreturn module.exports })())`)
    }
  }
  return `'use strict'\n${parts.join('\n')}\n`
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
  let validate: ValidateFunction
  try {
    validate = validatorOf(schema, opts.defaults ?? true, opts.coerce ?? false)
  } catch (err) {
    return [`${base === '' ? '(root)' : base}: the schema is not valid JSON Schema: ${(err as Error).message}`]
  }
  if (validate(value)) return []
  return problemsOf(validate.errors ?? [], base, opts.noun)
}

/** The first problem of `value` against `schema` (nothing is changed or coerced); null when it is valid. */
export function firstProblem (schema: object, value: unknown): Problem | null {
  const validate = validatorOf(schema, false, false)
  if (validate(value)) return null
  return problemList(validate.errors ?? [], '')[0] ?? { path: '(root)', what: 'is not valid', missing: false }
}
