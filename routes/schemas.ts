import { Type, type IntegerOptions, type NumberOptions, type TInteger, type TNumber } from '@sinclair/typebox'
import { Ajv, type SchemaValidateFunction } from 'ajv'
import { ISO_TIME_PATTERN, isoTimeMs } from '../config/schema.js'
import { InvalidField, InvalidQuery } from '../engine/kernel/errors.js'

// Schemas the route families share.

/** An ISO 8601 date (`2026-01-15`) or date and time (`2026-01-15T12:00:00Z`). */
export const IsoTime = Type.String({ pattern: ISO_TIME_PATTERN, description: 'an ISO 8601 date or time' })

/** Milliseconds since the epoch of an IsoTime (undefined when absent); a date that does not exist is refused, naming the query parameter or body field. */
export function parseIsoTime (text: string | undefined, param: string, where: 'query' | 'body' = 'query'): number | undefined {
  if (text === undefined) return undefined
  const t = isoTimeMs(text)
  if (t !== undefined) return t
  const reason = 'an ISO 8601 date or time that exists'
  throw where === 'query' ? new InvalidQuery({ param, reason }) : new InvalidField({ field: param, reason })
}

/**
 * An ajv plugin for the route schemas: the `finite` keyword refuses a number that is not finite.
 * Fastify coerces query strings (and string values in bodies) to numbers, and `Infinity` or
 * `1e400` become Infinity, which passes ajv's integer type and which its numeric keywords
 * (minimum, maximum) skip; every number of a route schema carries it (`Integer`, `Num`).
 */
export function finiteNumbers (ajv: Ajv): Ajv {
  const validate: SchemaValidateFunction = (schema: unknown, data: unknown) => {
    if (schema !== true || typeof data !== 'number' || Number.isFinite(data)) return true
    validate.errors = [{ keyword: 'finite', message: 'must be a finite number', params: {} }]
    return false
  }
  return ajv.addKeyword({ keyword: 'finite', schemaType: 'boolean', errors: true, validate })
}

/**
 * A validator compiler for the route schemas: Fastify's defaults (coercion of query strings,
 * defaults filled in, unknown properties removed) with the `finite` keyword, for an app that was
 * not made by buildApp (a plugin's tests on a bare Fastify mount the routes with it).
 */
export function routeValidatorCompiler (): (route: { schema: object }) => ReturnType<Ajv['compile']> {
  const ajv = finiteNumbers(new Ajv({ coerceTypes: 'array', useDefaults: true, removeAdditional: true, allErrors: false, verbose: true }))
  return ({ schema }) => ajv.compile(schema)
}

/**
 * The validator compiler of the call routes' bodies: strict, so that a value of the wrong type is
 * refused rather than coerced and sent on (`"stream": "true"` is a 400, not a stream), with
 * nothing removed or defaulted: the body goes upstream as the client wrote it.
 */
export const callBodyCompiler: (route: { schema: object }) => ReturnType<Ajv['compile']> = (() => {
  const ajv = finiteNumbers(new Ajv({ coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, verbose: true, strict: false }))
  return ({ schema }) => ajv.compile(schema)
})()

/** An integer of a route schema (finite). */
export const Integer = (opts: IntegerOptions = {}): TInteger => Type.Integer({ ...opts, finite: true })

/** A number of a route schema (finite). */
export const Num = (opts: NumberOptions = {}): TNumber => Type.Number({ ...opts, finite: true })
