import { Type, type TNull, type TSchema, type TUnion } from '@sinclair/typebox'
import { ISO_TIME_PATTERN } from '../../config/schema.js'
import { Integer, IsoTime, Num } from '../schemas.js'

// The admin API's route schemas: params, query strings and bodies. Bodies are open (unknown
// fields are ignored, as elsewhere in the API); every value they name is checked here, and what
// a schema cannot say (a USD amount's decimals) by the handler, naming the field either way.

/** An id of an organization or project made through the API (as the config's). */
const NewId = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$' })
/** Any id looked up: an unknown one is a 404. */
const Id = Type.String({ minLength: 1, maxLength: 1000 })

/** A USD amount: a decimal string keeps every digit; a JSON number is taken as it prints. */
export const Usd = Type.Union([Type.String({ maxLength: 40 }), Num()])

const Per = Type.Union([Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day'), Type.Literal('month')])

/** A quota: tokens or USD (exactly one), per UTC window. */
export const Quota = Type.Object({
  tokens: Type.Optional(Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
  usd: Type.Optional(Usd),
  per: Per
}, { oneOf: [{ required: ['tokens'] }, { required: ['usd'] }] })

// An object, or null to remove it. (A string or number that may be null is one schema of both
// types: in a union, the coercion a branch tried would be left behind for the next.)
const OrNull = <T extends TSchema>(t: T): TUnion<[T, TNull]> => Type.Union([t, Type.Null()])

const IsoTimeOrNull = Type.Unsafe<string | null>({ type: ['string', 'null'], pattern: ISO_TIME_PATTERN, description: 'an ISO 8601 date or time, or null' })

export const OrgParams = Type.Object({ org: Id })
export const ProjectParams = Type.Object({ org: Id, project: Id })
export const KeyParams = Type.Object({ id: Id })

export const NewOrgBody = Type.Object({
  id: NewId,
  balance_usd: Type.Optional(Usd),
  quota: Type.Optional(OrNull(Quota))
})

export const QuotaBody = Type.Object({ quota: OrNull(Quota) })

export const NewProjectBody = Type.Object({ id: NewId, quota: Type.Optional(OrNull(Quota)) })

export const CreditsBody = Type.Object({ amount_usd: Usd })

/** A key's model globs: at least one (an empty list would grant nothing, never everything). */
const Globs = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 1000 })
const Providers = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 1000 })
const PerMinute = Type.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 1, maximum: 1_000_000_000, finite: true })

/** A key's limits per minute; in a change, a field set to null is removed and an absent one kept. */
export const Limits = Type.Object({ rpm: Type.Optional(PerMinute), tpm: Type.Optional(PerMinute) })

export const Budget = Type.Object({ usd: Usd, per: Per })

export const NewKeyBody = Type.Object({
  org: Type.String({ minLength: 1, maxLength: 1000 }),
  project: Type.String({ minLength: 1, maxLength: 1000 }),
  models: Type.Optional(Globs),
  passthrough: Type.Optional(Providers),
  mcp: Type.Optional(Globs),
  name: Type.Optional(Type.String({ maxLength: 200 })),
  expires_at: Type.Optional(IsoTimeOrNull),
  limits: Type.Optional(OrNull(Limits)),
  budget: Type.Optional(OrNull(Budget))
})

export const KeyPatchBody = Type.Object({
  models: Type.Optional(Globs),
  passthrough: Type.Optional(Providers),
  mcp: Type.Optional(Globs),
  name: Type.Optional(Type.String({ maxLength: 200 })),
  expires_at: Type.Optional(IsoTimeOrNull),
  limits: Type.Optional(OrNull(Limits)),
  budget: Type.Optional(OrNull(Budget))
})

/** How long the old secret of a rotated key keeps working: up to 30 days. */
export const RotateBody = Type.Object({ grace_s: Integer({ minimum: 0, maximum: 30 * 86_400, default: 0 }) })

export const KeysQuery = Type.Object({ org: Type.Optional(Type.String()), project: Type.Optional(Type.String()) })

const STATUS = '(ok|client_aborted|upstream_error|timeout|refused)'
const ENDPOINTS = ['chat.completions', 'messages', 'responses', 'generate_content', 'embeddings', 'images.generations', 'passthrough', 'mcp.tools_call', 'count_tokens'] as const

const Filters = {
  org: Type.Optional(Type.String()),
  project: Type.Optional(Type.String()),
  key_id: Type.Optional(Type.String()),
  model: Type.Optional(Type.String()),
  status: Type.Optional(Type.String({ pattern: `^${STATUS}(,${STATUS})*$`, description: 'ok, client_aborted, upstream_error, timeout, refused: one or more, comma-separated' })),
  endpoint: Type.Optional(Type.Unsafe<typeof ENDPOINTS[number]>({ type: 'string', enum: ENDPOINTS, description: ENDPOINTS.join(', ') })),
  provider: Type.Optional(Type.String()),
  tag: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._:-]{1,64}$', description: 'records carrying this tag' })),
  since: Type.Optional(IsoTime),
  until: Type.Optional(IsoTime)
}

export const UsageQuery = Type.Object({
  ...Filters,
  limit: Integer({ minimum: 1, maximum: 10_000, default: 100 }),
  cursor: Type.Optional(Type.String())
})

const FIELD = '(org|project|key_id|model|provider|tag)'

export const SummaryQuery = Type.Object({
  ...Filters,
  group_by: Type.Optional(Type.String({ pattern: `^${FIELD}(,${FIELD})*$`, description: 'org, project, key_id, model, provider, tag: one or more, comma-separated (a call counts once under each of its tags)' })),
  bucket: Type.Optional(Type.Union([Type.Literal('hour'), Type.Literal('day')]))
})

/** A call's trace id: any text (one that names no call is a 404). */
export const TraceParams = Type.Object({ trace_id: Type.String({ minLength: 1, maxLength: 200 }) })

/** A console session's handle (the SHA-256 of its id, hex): one that names no live session is a 404. */
export const SessionParams = Type.Object({ id: Id })

/** Whose sessions to end: the identity provider's subject (`sub`), as the session list shows it. */
export const SessionsQuery = Type.Object({ sub: Type.String({ minLength: 1, maxLength: 1000 }) })

export const DeliveriesQuery = Type.Object({
  limit: Integer({ minimum: 1, maximum: 1000, default: 100 }),
  cursor: Type.Optional(Type.String())
})

export const AuditQuery = Type.Object({
  org: Type.Optional(Type.String()),
  limit: Integer({ minimum: 1, maximum: 1000, default: 100 }),
  cursor: Type.Optional(Type.String())
})
