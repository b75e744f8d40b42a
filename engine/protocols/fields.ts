import { InvalidField } from '../kernel/errors.js'
import { isObj } from '../kernel/json.js'
import type { Json, Protocol } from './types.js'

// What a cross-protocol pair does with each field of a client request, and readers for bodies
// it cannot trust: a wrong type is a 400 naming the field's path (`messages[2].content[0]`),
// never a TypeError from deep inside a pair.

/**
 * mapped: the pair translates it; passed: sent upstream as it is; dropped: no equivalent,
 * reported; accepted: taken without effect, as it asks for nothing the gateway does not do
 * anyway (Responses' `store`: nothing is stored); refused: a 400, as answering without it would
 * be a different answer (a Responses `previous_response_id`, a Gemini `cachedContent`).
 */
export type Fate = 'mapped' | 'passed' | 'dropped' | 'accepted' | 'refused'

/**
 * The upstream protocols a client protocol's fields have a fate toward: every one but its own
 * (where every field is passed as it is) and Responses (which only a Responses client reaches).
 * A protocol added to Protocol is a column more in every field table, which the compiler asks for.
 */
export type Toward<Own extends Protocol> = Exclude<Protocol, Own | 'responses'>

/** A field's row: its fate toward each upstream protocol of Toward<Own>. */
export type Columns<Own extends Protocol> = Readonly<Record<Toward<Own>, Fate>>

/** A protocol's field table as the translation table reads it: each field's row, by upstream protocol. */
export type FieldTable = Readonly<Record<string, Readonly<Partial<Record<Protocol, Fate>>>>>

/** Whether any column of a field's row reads it: a field dropped toward every upstream the reader leaves to its unknown-field handling. */
export function read (fates: Readonly<Record<string, Fate>> | undefined): boolean {
  return fates !== undefined && Object.values(fates).some((fate) => fate !== 'dropped')
}

/** The fields of a table some column reads (`prefix` + name), looked up by a reader once per field of a body. */
export function readFields (table: Readonly<Record<string, Readonly<Record<string, Fate>>>>, prefix = ''): ReadonlySet<string> {
  return new Set(Object.keys(table).filter((name) => read(table[name])).map((name) => prefix + name))
}

export { isObj }

const absent = (v: unknown): v is null | undefined => v === undefined || v === null

// Values that ask for nothing beyond the protocol's default: dropping them loses nothing.
const NEUTRAL = new Map<string, string>([
  ['frequency_penalty', '0'],
  ['presence_penalty', '0'],
  ['logprobs', 'false'],
  ['store', 'false'],
  ['logit_bias', '{}'],
  ['modalities', '["text"]'],
  ['tools.defer_loading', 'false'],
  ['tools.eager_input_streaming', 'false']
])

/**
 * The client fields a pair could not map, each once, sorted. A name may hold client-chosen text
 * (an unknown field, a tool type): the call encodes it for the Dropped-Params header
 * (engine/gateway/dropped-names.ts), as it does every dropped name.
 */
export class Dropped {
  private readonly names = new Set<string>()

  add (name: string): void {
    this.names.add(name)
  }

  /** A field whose value is the default of the protocol it came from is not worth a report. */
  addUnlessNeutral (name: string, value: unknown): void {
    if (NEUTRAL.get(name) !== JSON.stringify(value)) this.add(name)
  }

  list (): string[] {
    return [...this.names].sort()
  }
}

/** One upstream protocol's column of a protocol's field table: the fates a pair toward it sorts a body by. */
export function column<F extends string, U extends string> (table: Readonly<Record<F, Readonly<Record<U, Fate>>>>, upstream: U): Readonly<Record<F, Fate>> {
  const out = {} as Record<F, Fate>
  for (const field of Object.keys(table) as F[]) out[field] = table[field][upstream]
  return out
}

/**
 * Sorts the fields of `body` by a pair's table: `passed` ones are copied into `out`, `dropped`
 * ones and those the table does not know are reported (as `prefix.name` under a prefix).
 * Null values count as absent. `mapped` fields are left to the pair.
 */
export function sortFields<T extends object> (body: T, fates: Readonly<Record<string, Fate>>, dropped: Dropped, out?: Json, prefix = ''): void {
  for (const key of Object.keys(body)) {
    const value: unknown = body[key as keyof T]
    if (absent(value)) continue
    const fate = Object.hasOwn(fates, key) ? fates[key] : 'dropped'
    if (fate === 'passed' && out !== undefined) out[key] = value
    else if (fate === 'dropped') dropped.addUnlessNeutral(prefix + key, value)
  }
}

/** A client value through a pair's table: absent → undefined; a value the table lacks is reported as `name`. */
export function mapValue<T> (table: ReadonlyMap<string, T>, value: unknown, name: string, dropped: Dropped): T | undefined {
  if (absent(value)) return undefined
  const mapped = typeof value === 'string' ? table.get(value) : undefined
  if (mapped === undefined) dropped.add(name)
  return mapped
}

// The list and object readers keep the type a field has in the protocol's SDK types: a body is
// typed so from where it is read (its reader), and each value is still checked where it is used,
// as the body came from a client or an upstream. A value of no known shape (`unknown`, or `{}`
// once null is ruled out) reads as Json.

/** An object type as the readers return it: Json when it names no field. */
type Known<T extends object> = keyof T extends never ? Json : T

/** A list field: absent → [], an array → its entries, anything else → 400. */
export function list<T> (v: readonly T[] | null | undefined, field: string): readonly T[]
export function list (v: unknown, field: string): unknown[]
export function list (v: unknown, field: string): unknown[] {
  if (absent(v)) return []
  if (!Array.isArray(v)) throw new InvalidField({ field, reason: 'must be an array' })
  return v
}

/** An object the pair must read. */
export function entry<T extends object> (v: T | null | undefined, field: string): Known<T>
export function entry (v: unknown, field: string): Json
export function entry (v: unknown, field: string): object {
  if (!isObj(v)) throw new InvalidField({ field, reason: 'must be an object' })
  return v
}

/** An object the pair may read: absent → undefined. */
export function optEntry<T extends object> (v: T | null | undefined, field: string): Known<T> | undefined
export function optEntry (v: unknown, field: string): Json | undefined
export function optEntry (v: unknown, field: string): object | undefined {
  return absent(v) ? undefined : entry(v, field)
}

export function text (v: unknown, field: string): string {
  if (typeof v !== 'string') throw new InvalidField({ field, reason: 'must be a string' })
  return v
}

/** A string the pair may read: absent → undefined. */
export function optText (v: unknown, field: string): string | undefined {
  return absent(v) ? undefined : text(v, field)
}

export function optBoolean (v: unknown, field: string): boolean | undefined {
  if (absent(v)) return undefined
  if (typeof v !== 'boolean') throw new InvalidField({ field, reason: 'must be a boolean' })
  return v
}

/** A number the pair may read: absent → undefined, else a finite number. */
export function optNumber (v: unknown, field: string): number | undefined {
  if (absent(v)) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new InvalidField({ field, reason: 'must be a number' })
  return v
}

/** A token count: absent → undefined, else a positive integer. */
export function optCount (v: unknown, field: string): number | undefined {
  if (absent(v)) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new InvalidField({ field, reason: 'must be a positive integer' })
  return v
}

/** A list of strings (`stop`, `stop_sequences`); a lone string is a list of one. */
export function strings (v: unknown, field: string): string[] {
  if (typeof v === 'string') return [v]
  return list(v, field).map((s, i) => text(s, `${field}[${i}]`))
}

/** A kind of list entry as a report name: a server tool's dated type loses its date (`web_search_20250305` → `web_search`). */
export function kindOf (type: unknown): string {
  return typeof type === 'string' ? type.replace(/_\d{8}$/, '') : 'unknown'
}
