import { Type, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox'

// What the admin API answers, route by route: one TypeBox schema per answer, registered as the
// route's response schema (Fastify serializes the answer by it, and the handler's return type is
// checked against it), and its static type, which the operator's console imports
// (routes/console/web/admin/types.ts) instead of declaring the shapes a second time. This module
// imports nothing but TypeBox: the console's own type check reads it with the browser's types.
//
// A schema names every field the route answers: a field it leaves out is not sent.

/**
 * `t` or null, as a type list (`type: ['string', 'null']`) rather than an anyOf: the serializer
 * compiled from a type list needs no validator to choose a branch, so it is built and runs faster.
 */
const Nullable = <T extends TSchema>(t: T): TUnsafe<Static<T> | null> =>
  Type.Unsafe<Static<T> | null>(typeof t.type === 'string' ? { ...t, type: [t.type, 'null'] } : { anyOf: [t, { type: 'null' }] })

/** One of a few strings, as an enum (the same reason). */
const OneOf = <const V extends readonly string[]>(values: V): TUnsafe<V[number]> => Type.Unsafe<V[number]>({ type: 'string', enum: values })

/** A time: ISO 8601, UTC. */
const Time = Type.String({ description: 'ISO 8601 date and time, UTC' })
/** An amount of money: a decimal string of USD, exact. */
const Usd = Type.String({ description: 'USD, a decimal string' })
const Count = Type.Integer({ minimum: 0 })
const Per = OneOf(['minute', 'hour', 'day', 'month'])
const RoleSchema = OneOf(['admin', 'viewer', 'org_admin'])
export type Role = Static<typeof RoleSchema>
const Breaker = OneOf(['closed', 'open', 'half_open'])
const McpStatus = OneOf(['ready', 'starting', 'down'])

/** `{object: "list", data}` */
const ListOf = <T extends TSchema>(item: T) => Type.Object({ object: Type.Literal('list'), data: Type.Array(item) })
/** A page: `{object: "list", data, next_cursor}`, null on the last page. */
const PageOf = <T extends TSchema>(item: T) => Type.Object({ object: Type.Literal('list'), data: Type.Array(item), next_cursor: Nullable(Type.String()) })

/** A quota or a key's budget in its current window. */
const QuotaViewSchema = Type.Object({
  limit: Type.String(),
  used: Type.String(),
  unit: OneOf(['tokens', 'usd']),
  per: Per,
  resets_at: Time
})
export type QuotaView = Static<typeof QuotaViewSchema>

const ProjectSchema = Type.Object({ id: Type.String(), quota: Nullable(QuotaViewSchema) })
export type Project = Static<typeof ProjectSchema>

const OrgSchema = Type.Object({
  id: Type.String(),
  balance_usd: Usd,
  held_usd: Usd,
  spent_usd: Usd,
  uncollected_usd: Usd,
  quota: Nullable(QuotaViewSchema),
  projects: Type.Array(ProjectSchema)
})
export type Org = Static<typeof OrgSchema>

const KeySchema = Type.Object({
  id: Type.String(),
  org: Type.String(),
  project: Type.String(),
  name: Type.String(),
  models: Type.Array(Type.String()),
  passthrough: Type.Array(Type.String()),
  /** Globs over server/tool: the MCP tools the key may list and call. */
  mcp: Type.Array(Type.String()),
  created_at: Time,
  expires_at: Nullable(Time),
  limits: Nullable(Type.Object({ rpm: Nullable(Count), tpm: Nullable(Count) })),
  budget: Nullable(QuotaViewSchema),
  last_used_at: Nullable(Time),
  revoked: Type.Boolean(),
  replaces: Nullable(Type.String())
})
export type Key = Static<typeof KeySchema>

/** A key as made: with its secret, shown this once. */
const NewKeySchema = Type.Composite([KeySchema, Type.Object({ key: Type.String() })])
export type NewKey = Static<typeof NewKeySchema>

const RotationSchema = Type.Object({ id: Type.String(), key: Type.String(), replaces: Type.String(), old_valid_until: Time })
export type Rotation = Static<typeof RotationSchema>

const DeletedSchema = Type.Object({ id: Type.String(), deleted: Type.Literal(true) })
export type Deleted = Static<typeof DeletedSchema>
const RevokedSchema = Type.Object({ id: Type.String(), revoked: Type.Literal(true) })
export type Revoked = Static<typeof RevokedSchema>

/** The caller: an admin token (by its name) or a signed-in operator, with the session's CSRF token and end. */
const WhoamiSchema = Type.Object({
  kind: OneOf(['sso', 'token']),
  name: Nullable(Type.String()),
  role: RoleSchema,
  org: Nullable(Type.String()),
  sub: Nullable(Type.String()),
  email: Nullable(Type.String()),
  expires_at: Nullable(Time),
  csrf_token: Nullable(Type.String())
})
export type Whoami = Static<typeof WhoamiSchema>

/** A charge by part (decimal strings summing to cost_usd) and the tier billed at (its above_input_tokens; null: the base rates). */
const CostDetailSchema = Type.Object({
  input: Usd,
  cached_input: Usd,
  cache_write: Usd,
  output: Usd,
  images: Usd,
  per_request: Usd,
  tool_call: Usd,
  tier: Nullable(Type.Number())
})
export type CostDetail = Static<typeof CostDetailSchema>

const UsageRecordSchema = Type.Object({
  id: Type.String(),
  created_at: Time,
  trace_id: Type.String(),
  org: Nullable(Type.String()),
  project: Nullable(Type.String()),
  key_id: Nullable(Type.String()),
  endpoint: Type.String(),
  /** The model that answered (and is charged for). */
  model: Type.String(),
  /** The model or alias the call named when another answered it (an alias, a fallback); null otherwise. */
  requested_model: Nullable(Type.String()),
  /** The models tried that could not answer, and why, in order ([] when the first answered). */
  fallbacks: Type.Array(Type.Object({ model: Type.String(), why: Type.String() })),
  provider: Nullable(Type.String()),
  stream: Type.Boolean(),
  status: Type.String(),
  /** A refused call's error code (status "refused"); null for every other record. */
  error: Nullable(Type.String()),
  prompt_tokens: Count,
  cached_input_tokens: Count,
  completion_tokens: Count,
  total_tokens: Count,
  cache_write_tokens: Count,
  images: Count,
  cost_usd: Usd,
  /** null for records made before it was kept. */
  cost_detail: Nullable(CostDetailSchema),
  latency_ms: Type.Number(),
  ttft_ms: Nullable(Type.Number()),
  cache_hit: Type.Boolean(),
  saved_usd: Usd,
  /** The tags the call carried ([] for none). */
  tags: Type.Array(Type.String())
})
export type UsageRecord = Static<typeof UsageRecordSchema>

/** One attempt at a provider; `outcome` is ok, client_error, server_error, network_error, timeout, aborted or request_error (absent in records made before it was kept). */
const AttemptSchema = Type.Object({
  provider: Type.String(),
  upstream_model: Nullable(Type.String()),
  outcome: Type.Optional(Type.String()),
  status: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  latency_ms: Nullable(Type.Number())
})
export type Attempt = Static<typeof AttemptSchema>

/** A record with the call's attempts and the parameters it dropped (names encoded as the Dropped-Params header has them). */
const UsageDetailSchema = Type.Composite([UsageRecordSchema, Type.Object({ attempts: Type.Array(AttemptSchema), dropped_params: Type.Array(Type.String()) })])
export type UsageDetail = Static<typeof UsageDetailSchema>

/** One call by its trace id, with the request and answer the usage plugin kept (store_content), or null. */
const CallSchema = Type.Composite([UsageDetailSchema, Type.Object({ content: Nullable(Type.Object({ request: Nullable(Type.String()), response: Nullable(Type.String()) })) })])
export type Call = Static<typeof CallSchema>

/** A line of the usage summary: the group's fields asked for (`group_by`), its bucket, its sums. */
const SummaryRowSchema = Type.Object({
  org: Type.Optional(Nullable(Type.String())),
  project: Type.Optional(Nullable(Type.String())),
  key_id: Type.Optional(Nullable(Type.String())),
  model: Type.Optional(Nullable(Type.String())),
  provider: Type.Optional(Nullable(Type.String())),
  /** By tag: a call counts under each of its tags; null: the untagged calls. */
  tag: Type.Optional(Nullable(Type.String())),
  bucket_start: Type.Optional(Time),
  calls: Count,
  errors: Count,
  prompt_tokens: Count,
  cached_input_tokens: Count,
  completion_tokens: Count,
  cost_usd: Usd,
  saved_usd: Usd
})
export type SummaryRow = Static<typeof SummaryRowSchema>

const Identity = Type.Union([
  Type.Object({ kind: Type.Literal('sso'), sub: Type.String(), email: Nullable(Type.String()) }),
  Type.Object({ kind: Type.Literal('token'), name: Type.String() })
])

/** A change made through the admin API or the CLI; `detail` holds no secret. */
const AuditLineSchema = Type.Object({
  id: Type.String(),
  at: Time,
  action: Type.String(),
  target: Type.String(),
  org: Nullable(Type.String()),
  actor: OneOf(['admin', 'cli', 'config']),
  identity: Nullable(Identity),
  detail: Type.Record(Type.String(), Type.Unknown())
})
export type AuditLine = Static<typeof AuditLineSchema>

const ReloadedSchema = Type.Object({ reloaded: Type.Literal(true), changes: Type.Array(Type.String()), generation: Count, workers: Type.Optional(Count) })
export type Reloaded = Static<typeof ReloadedSchema>

/** A reload refused: the numeric-code error and every problem of the file (the running configuration is kept). */
const ReloadRefusedSchema = Type.Object({
  error: Type.Object({ code: Type.String(), type: Type.String(), message: Type.String() }),
  problems: Type.Array(Type.String())
})
export type ReloadRefused = Static<typeof ReloadRefusedSchema>

const ProviderSchema = Type.Object({
  id: Type.String(),
  protocol: Type.String(),
  /** The cloud platform it is reached on (azure, bedrock, vertex); null: the vendor's own API. */
  platform: Nullable(Type.String()),
  base_url: Nullable(Type.String()),
  configured: Type.Boolean(),
  breaker: Breaker,
  healthy: Type.Boolean(),
  avg_latency_ms: Nullable(Type.Number()),
  recent_failures: Type.Array(Type.Object({ at: Time, status: Nullable(Type.Integer()), error: Nullable(Type.String()), pid: Type.Integer() })),
  /** Each worker's own breaker and latency average (a worker keeps its own). */
  workers: Type.Array(Type.Object({ pid: Type.Integer(), breaker: Breaker, avg_latency_ms: Nullable(Type.Number()) }))
})
export type Provider = Static<typeof ProviderSchema>

const McpServerSchema = Type.Object({
  id: Type.String(),
  transport: OneOf(['http', 'stdio']),
  status: McpStatus,
  tools: Type.Array(Type.String()),
  last_error: Nullable(Type.String()),
  workers: Type.Array(Type.Object({ pid: Type.Integer(), status: McpStatus }))
})
export type McpServer = Static<typeof McpServerSchema>

/** The providers or MCP servers, as every worker sees them: `workers` reports were merged. */
const Fleet = <T extends TSchema>(item: T) => Type.Object({ object: Type.Literal('list'), pid: Type.Integer(), workers: Count, data: Type.Array(item) })

const PluginSchema = Type.Object({ name: Type.String(), module: Nullable(Type.String()), enabled: Type.Boolean(), options: Type.Unknown() })
export type Plugin = Static<typeof PluginSchema>

/** A catalog price that differs from the price database's. */
const PriceDifferenceSchema = Type.Object({ model: Type.String(), field: Type.String(), catalog: Type.String(), reference: Type.String(), source: Type.String() })
export type PriceDifference = Static<typeof PriceDifferenceSchema>

/** A live console session, as an admin sees it: named by its handle, never by its id. */
const OperatorSessionSchema = Type.Object({
  id: Type.String(),
  sub: Type.String(),
  email: Nullable(Type.String()),
  name: Nullable(Type.String()),
  role: RoleSchema,
  org: Nullable(Type.String()),
  created_at: Time,
  expires_at: Time,
  current: Type.Boolean()
})
export type OperatorSession = Static<typeof OperatorSessionSchema>

/** An alert's webhook delivery: the event, where it goes (without its query string), how it stands. */
const DeliverySchema = Type.Object({
  id: Type.String(),
  type: Type.String(),
  webhook: Type.String(),
  status: OneOf(['pending', 'delivered', 'failed']),
  attempts: Count,
  created_at: Time,
  next_attempt_at: Nullable(Time),
  delivered_at: Nullable(Time),
  last_status: Nullable(Type.Integer()),
  last_error: Nullable(Type.String()),
  event: Type.Object({ type: Type.String(), created_at: Time, data: Type.Record(Type.String(), Type.Unknown()) })
})
export type Delivery = Static<typeof DeliverySchema>

/** Every answer of the admin API by route; the routes register these as their response schemas. */
export const Answers = {
  whoami: WhoamiSchema,
  orgs: ListOf(OrgSchema),
  org: OrgSchema,
  project: ProjectSchema,
  deleted: DeletedSchema,
  keys: ListOf(KeySchema),
  key: KeySchema,
  newKey: NewKeySchema,
  rotation: RotationSchema,
  revoked: RevokedSchema,
  usage: PageOf(UsageDetailSchema),
  call: CallSchema,
  summary: ListOf(SummaryRowSchema),
  audit: PageOf(AuditLineSchema),
  deliveries: PageOf(DeliverySchema),
  reloaded: ReloadedSchema,
  reloadRefused: ReloadRefusedSchema,
  providers: Fleet(ProviderSchema),
  mcpServers: Fleet(McpServerSchema),
  plugins: Type.Object({ object: Type.Literal('list'), generation: Nullable(Count), data: Type.Array(PluginSchema) }),
  prices: Type.Object({ object: Type.Literal('list'), data: Type.Array(PriceDifferenceSchema), unknown: Type.Array(Type.String()), checked: Count }),
  sessions: ListOf(OperatorSessionSchema),
  sessionEnded: Type.Object({ id: Type.String(), ended: Type.Literal(true) }),
  subjectEnded: Type.Object({ sub: Type.String(), ended: Count })
} as const

export type AnswerOf<K extends keyof typeof Answers> = Static<typeof Answers[K]>
