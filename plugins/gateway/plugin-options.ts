import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'

// Plugin options are validated against each plugin's own JSON Schema (a TypeBox schema is one;
// a plugin from outside the project may give a plain object), with the schema's defaults filled
// in, and every problem reported with its path: `plugins[4].options.tag: is required`.

// verbose: an error carries the schema it failed, so that a union of constants is named as a list
const ajv = new Ajv({ useDefaults: true, allErrors: true, strict: false, coerceTypes: false, verbose: true })
const compiled = new WeakMap<object, ValidateFunction>()

/** `/a/0/b` → `a[0].b` under `base` */
function pathOf (base: string, pointer: string): string {
  let out = base
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    out += /^\d+$/.test(part) ? `[${part}]` : `.${part}`
  }
  return out
}

function describe (e: ErrorObject): { where: string, what: string } {
  const p = e.params as Record<string, unknown>
  switch (e.keyword) {
    case 'required': return { where: `/${String(p.missingProperty)}`, what: 'is required' }
    case 'additionalProperties': return { where: `/${String(p.additionalProperty)}`, what: 'is not a known option' }
    case 'type': return { where: '', what: `must be ${String(p.type)}` }
    case 'minimum': return { where: '', what: `must be >= ${String(p.limit)}` }
    case 'exclusiveMinimum': return { where: '', what: `must be > ${String(p.limit)}` }
    case 'maximum': return { where: '', what: `must be <= ${String(p.limit)}` }
    case 'exclusiveMaximum': return { where: '', what: `must be < ${String(p.limit)}` }
    case 'enum': return { where: '', what: `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}` }
    case 'const': return { where: '', what: `must be ${JSON.stringify(p.allowedValue)}` }
    default: return { where: '', what: e.message ?? 'is not valid' }
  }
}

/** The values of a union whose branches are all constants, else undefined. */
function constants (branches: unknown): unknown[] | undefined {
  if (!Array.isArray(branches) || branches.length === 0) return undefined
  const values = branches.map((b) => (b !== null && typeof b === 'object' && 'const' in b) ? (b as { const: unknown }).const : undefined)
  return values.every((v) => v !== undefined) ? values : undefined
}

/**
 * Validates `value` (defaults filled in, in place) against `schema`; returns the problems, each
 * as `<base>.<path>: <what>`. A schema ajv cannot compile is a problem of its own.
 */
export function checkOptions (schema: object, value: Record<string, unknown>, base: string): string[] {
  let validate = compiled.get(schema)
  if (validate === undefined) {
    try {
      validate = ajv.compile(schema)
    } catch (err) {
      return [`${base}: the plugin's options schema is not valid JSON Schema: ${(err as Error).message}`]
    }
    compiled.set(schema, validate)
  }
  if (validate(value)) return []
  const seen = new Set<string>()
  const out: string[] = []
  const errors = validate.errors ?? []
  // a value outside a union of constants (TypeBox's Union of Literals): one line listing them,
  // not one per constant and one for the union
  const choices = errors.filter((e) => e.keyword === 'anyOf' && constants(e.schema) !== undefined)
  const inChoice = (e: ErrorObject): boolean => choices.some((c) => e !== c && e.schemaPath.startsWith(`${c.schemaPath}/`))
  for (const e of errors) {
    if (inChoice(e)) continue
    const { where, what } = e.keyword === 'anyOf' && choices.includes(e)
      ? { where: '', what: `must be one of ${(constants(e.schema) ?? []).map((v) => JSON.stringify(v)).join(', ')}` }
      : describe(e)
    const line = `${pathOf(base, e.instancePath + where)}: ${what}`
    if (!seen.has(line)) { seen.add(line); out.push(line) }
  }
  return out
}

/** The options a schema declares, with their defaults, for listings (`modelgate plugins`). */
export function describeOptions (schema: object | undefined): Array<{ name: string, type: string, default?: unknown, required: boolean, description?: string }> {
  const s = schema as { properties?: Record<string, Record<string, unknown>>, required?: string[] } | undefined
  if (s?.properties === undefined) return []
  return Object.entries(s.properties).filter(([, p]) => p.deprecated !== true).map(([name, p]) => ({
    name,
    type: typeof p.type === 'string' ? p.type : Array.isArray(p.anyOf) ? 'one of several' : 'any',
    ...(p.default !== undefined ? { default: p.default } : {}),
    required: s.required?.includes(name) === true && p.default === undefined,
    ...(typeof p.description === 'string' ? { description: p.description } : {})
  }))
}
