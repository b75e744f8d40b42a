import createError, { type FastifyErrorConstructor } from '@fastify/error'
import { en, type MessageKey } from './i18n/en.js'

// Every error the gateway answers with, in one place. Hooks and handlers
// throw these; the one error handler (engine/gateway/core.ts) renders them in the route family's shape:
//   numeric-code shape  {error: {code, message, type}}            (chat, models, admin, others)
//   Messages shape      {type: "error", error: {type, message}}   (/v1/messages)
//   Google's shape      {error: {code, message, status}}          (the Gemini API)
//   JSON-RPC's          {jsonrpc, id, error: {code, message, data}} (/mcp)
// `code` is the documented error.code (a number or a string; docs/api.md); where none is
// documented, the HTTP status is used, so that error.code is always present and machine-readable.

export type Params = Record<string, string | number>

export interface ErrorSpec {
  status: number
  code?: string | number
  /** error.type in the numeric-code shape (what the openai SDK reads). */
  openaiType?: string
  /** error.type in the Messages shape; defaults by status (messagesTypeFor). */
  messagesType?: string
  /** false: a retry cannot help, so `x-should-retry: false` tells the official SDKs not to. */
  retry?: boolean
  /** The JSON-RPC error code on /mcp; default -32000 (REFUSED). */
  rpc?: number
}

export interface GatewayError extends Error {
  code: string
  statusCode: number
  key: MessageKey
  params: Params
  spec: ErrorSpec
  /** Headers to add to the error response (Retry-After...). */
  headers?: Record<string, string>
  /** For errors relayed from an upstream: its own message, which is not localized. */
  upstreamMessage?: string
  /** false: the message is shown as it is in every locale (a plugin's own refusal). */
  localized?: boolean
}

export function format (template: string, params: Params): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => Object.hasOwn(params, name) ? String(params[name]) : whole)
}

export type GatewayErrorClass = new (params?: Params, opts?: { cause?: unknown, headers?: Record<string, string> }) => GatewayError

function define (key: MessageKey, spec: ErrorSpec): GatewayErrorClass {
  const Base: FastifyErrorConstructor = createError(`MG_${key.toUpperCase()}`, '%s', spec.status)
  const Cls = class extends (Base as unknown as new (message: string) => Error & { code: string, statusCode: number }) {
    key = key
    params: Params
    spec = spec
    headers?: Record<string, string>
    constructor (params: Params = {}, opts: { cause?: unknown, headers?: Record<string, string> } = {}) {
      super(format(en[key], params))
      this.params = params
      if (opts.cause !== undefined) this.cause = opts.cause
      if (opts.headers !== undefined) this.headers = opts.headers
    }
  }
  Object.defineProperty(Cls, 'name', { value: `GatewayError[${key}]` })
  return Cls as unknown as GatewayErrorClass
}

export const InvalidJson = define('invalid_json', { status: 400, openaiType: 'invalid_request_error', retry: false, rpc: -32700 })
export const InvalidBody = define('invalid_body', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const UnsupportedMediaType = define('unsupported_media_type', { status: 415, openaiType: 'invalid_request_error', messagesType: 'invalid_request_error', retry: false })
export const MissingField = define('missing_field', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const InvalidField = define('invalid_field', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const InvalidVideoUrl = define('invalid_video_url', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const InvalidImageUrl = define('invalid_image_url', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const BodyTooDeep = define('body_too_deep', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const InvalidUrl = define('invalid_url', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const MalformedRequest = define('malformed_request', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const ModalityNotSupported = define('modality_not_supported', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const NotEmbeddingModel = define('not_embedding_model', { status: 400, code: 'wrong_model_kind', openaiType: 'invalid_request_error', retry: false })
export const NotImageModel = define('not_image_model', { status: 400, code: 'wrong_model_kind', openaiType: 'invalid_request_error', retry: false })
export const NotChatModel = define('not_chat_model', { status: 400, code: 'wrong_model_kind', openaiType: 'invalid_request_error', retry: false })
export const NoImageGenerated = define('no_image_generated', { status: 400, code: 'no_image_generated', openaiType: 'invalid_request_error', retry: false })
export const ServerToolUnpriced = define('server_tool_unpriced', { status: 400, code: 'server_tool_unpriced', openaiType: 'invalid_request_error', messagesType: 'invalid_request_error', retry: false })
export const UnsupportedOnUpstream = define('unsupported_on_upstream', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const NoStoredHistory = define('no_stored_history', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const NoBackground = define('no_background', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const NoStoredResponse = define('no_stored_response', { status: 404, code: 'response_not_found', openaiType: 'invalid_request_error', retry: false })
export const MissingModelId = define('missing_model_id', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const Unauthorized = define('unauthorized', { status: 401, openaiType: 'authentication_error', retry: false })
export const InsufficientBalance = define('insufficient_balance', { status: 402, code: 402, openaiType: 'insufficient_balance', retry: false })
export const NoOrgContext = define('no_org_context', { status: 403, openaiType: 'permission_error', retry: false })
export const ModelNotFound = define('model_not_found', { status: 404, code: 'model_not_found', openaiType: 'invalid_request_error', retry: false })
export const RouteNotFound = define('route_not_found', { status: 404, openaiType: 'invalid_request_error', retry: false })
export const ClientTimeout = define('client_timeout', { status: 408, openaiType: 'timeout_error' })
export const RequestTimeout = define('request_timeout', { status: 408, openaiType: 'timeout_error' })
export const StreamIdleTimeout = define('stream_idle_timeout', { status: 408, openaiType: 'timeout_error' })
export const DuplicateRequest = define('duplicate_request', { status: 409, code: 'duplicate_request', openaiType: 'invalid_request_error', retry: false })
export const RequestTooLarge = define('request_too_large', { status: 413, code: 'request_too_large', openaiType: 'invalid_request_error', messagesType: 'request_too_large', retry: false })
export const ContentBlocked = define('content_blocked', { status: 400, code: 'content_blocked', rpc: -32602, openaiType: 'invalid_request_error', messagesType: 'invalid_request_error', retry: false })
export const UrlTooLong = define('url_too_long', { status: 414, openaiType: 'invalid_request_error', retry: false })
export const HeadersTooLarge = define('headers_too_large', { status: 431, openaiType: 'invalid_request_error', retry: false })
export const QuotaExceeded = define('quota_exceeded', { status: 429, code: 429, openaiType: 'quota_exceeded' })
export const RateLimited = define('rate_limited', { status: 429, code: 429, openaiType: 'rate_limit_error' })
export const NotImplemented = define('not_implemented', { status: 501, openaiType: 'not_implemented', retry: false })
export const UpstreamUnavailable = define('upstream_unavailable', { status: 502, openaiType: 'api_error' })
export const UpstreamCredentialsRefused = define('upstream_credentials_refused', { status: 502, code: 'upstream_credentials_refused', openaiType: 'api_error' })
export const UpstreamStreamError = define('upstream_stream_error', { status: 502, openaiType: 'api_error' })
export const NoProvider = define('no_provider', { status: 503, openaiType: 'overloaded_error' })
// a model whose providers have no credentials: only the operator can change that
export const NoCredentials = define('no_credentials', { status: 503, code: 'no_credentials', openaiType: 'overloaded_error', retry: false })
export const Internal = define('internal', { status: 500, openaiType: 'api_error' })
export const AdminUnauthorized = define('admin_unauthorized', { status: 401, openaiType: 'authentication_error', retry: false })
// roles on the admin API and the consoles (routes/access.ts)
export const PermissionDenied = define('permission_denied', { status: 403, code: 'permission_denied', openaiType: 'permission_error', retry: false })
export const SessionEnded = define('session_ended', { status: 401, code: 'session_ended', openaiType: 'authentication_error', retry: false })
export const CsrfFailed = define('csrf_failed', { status: 403, code: 'csrf_failed', openaiType: 'permission_error', retry: false })
export const OperatorScopeRequired = define('operator_scope_required', { status: 400, openaiType: 'invalid_request_error', retry: false })
// single sign-on, answered as pages (routes/console/auth.ts)
export const SsoFailed = define('sso_failed', { status: 400, code: 'sso_failed', retry: false })
export const SsoNoRole = define('sso_no_role', { status: 403, code: 'permission_denied', openaiType: 'permission_error', retry: false })
export const SsoLoginExpired = define('sso_login_expired', { status: 400, code: 'sso_login_expired', retry: false })
export const SsoUnavailable = define('sso_unavailable', { status: 502, code: 'sso_unavailable', openaiType: 'api_error' })
export const OrgNotFound = define('org_not_found', { status: 404, code: 'org_not_found', retry: false })
export const KeyNotFound = define('key_not_found', { status: 404, code: 'key_not_found', retry: false })
export const SessionNotFound = define('session_not_found', { status: 404, code: 'session_not_found', retry: false })
export const UsageNotFound = define('usage_not_found', { status: 404, code: 'usage_not_found', retry: false })
export const KeyExpired = define('key_expired', { status: 401, code: 'key_expired', openaiType: 'authentication_error', retry: false })
export const KeyRateLimited = define('key_rate_limited', { status: 429, code: 429, openaiType: 'rate_limit_error' })
export const KeyRevoked = define('key_revoked', { status: 409, code: 'key_revoked', retry: false })
export const KeyExpiredNotRotated = define('key_expired_not_rotated', { status: 409, code: 'key_expired', retry: false })
export const OrgExists = define('org_exists', { status: 409, code: 'org_exists', retry: false })
export const ProjectExists = define('project_exists', { status: 409, code: 'project_exists', retry: false })
export const ProjectNotFound = define('project_not_found', { status: 404, code: 'project_not_found', retry: false })
export const InvalidCursor = define('invalid_cursor', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const InvalidQuery = define('invalid_query', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const PassthroughForbidden = define('passthrough_forbidden', { status: 403, openaiType: 'permission_error', retry: false })
export const StoreUnavailable = define('store_unavailable', { status: 503, openaiType: 'overloaded_error' })
export const ConfigOwned = define('config_owned', { status: 409, code: 'config_owned', retry: false })
export const UnmeteredEndpoint = define('unmetered_endpoint', { status: 403, code: 'unmetered_endpoint', openaiType: 'permission_error', retry: false })
export const UnreadableModel = define('unreadable_model', { status: 403, code: 'unreadable_model', openaiType: 'permission_error', retry: false })
export const PassthroughPath = define('passthrough_path', { status: 400, openaiType: 'invalid_request_error', retry: false })
// an object of a provider's account that the caller's organization did not make, or none at all: the two are not told apart
export const ObjectNotFound = define('object_not_found', { status: 404, code: 'object_not_found', openaiType: 'invalid_request_error', retry: false })
export const UnreadableReference = define('unreadable_reference', { status: 400, code: 'unreadable_reference', openaiType: 'invalid_request_error', retry: false })
export const UnattributableEndpoint = define('unattributable_endpoint', { status: 403, code: 'unattributable_endpoint', openaiType: 'permission_error', retry: false })
export const UnforwardableRequest = define('unforwardable_request', { status: 400, openaiType: 'invalid_request_error', retry: false })
export const McpServerNotFound = define('mcp_server_not_found', { status: 404, code: 'mcp_server_not_found', retry: false })
// what MCP answers for a tool it does not have: invalid params
export const McpToolNotFound = define('mcp_tool_not_found', { status: 404, code: 'tool_not_found', retry: false, rpc: -32602 })
export const McpBatch = define('mcp_batch', { status: 400, openaiType: 'invalid_request_error', retry: false, rpc: -32600 })
export const McpMethodNotAllowed = define('mcp_method_not_allowed', { status: 405, retry: false })

/** The longest wait until a limit's window reopens that the official SDKs are left to retry through. */
export const RETRY_WITHIN_S = 60

/**
 * The headers of a refusal that lifts in `seconds` (a limit's window reopens): Retry-After, and,
 * when that is more than RETRY_WITHIN_S away, `x-should-retry: false`. The official SDKs wait
 * for whatever Retry-After says before their automatic retries, hours for a daily budget; told
 * not to retry, they give up at once and the application decides.
 */
export function retryAfterHeaders (seconds: number): Record<string, string> {
  const s = Math.max(1, Math.ceil(seconds))
  return s > RETRY_WITHIN_S ? { 'retry-after': String(s), 'x-should-retry': 'false' } : { 'retry-after': String(s) }
}

/**
 * A plugin's own refusal of a call (`fastify.gateway.refusal({...})`): its status, code and
 * message, shown as they are in every locale, in the route family's shape.
 */
export class Refusal extends Error implements GatewayError {
  readonly code = 'MG_PLUGIN_REFUSAL'
  readonly statusCode: number
  readonly key: MessageKey = 'internal'
  readonly params: Params = {}
  readonly spec: ErrorSpec
  readonly headers?: Record<string, string>
  readonly localized = false
  constructor (s: { status: number, code?: string | number, message: string, type?: string, headers?: Record<string, string>, retry?: boolean }) {
    super(s.message)
    if (!Number.isInteger(s.status) || s.status < 400 || s.status > 599) throw new RangeError(`a refusal's status must be 400-599, not ${s.status}`)
    this.name = 'Refusal'
    this.statusCode = s.status
    this.spec = { status: s.status, code: s.code, openaiType: s.type, retry: s.retry }
    if (s.headers !== undefined) this.headers = s.headers
  }
}

/**
 * An upstream 4xx relayed to the client: its status is kept and its body re-shaped into the
 * client's error shape by the translator pair; the body is sent as it is.
 */
export class UpstreamClientError extends Error {
  readonly statusCode: number
  readonly body: Record<string, unknown>
  /** The provider's own error body, parsed (what a fallback's class is read from). */
  readonly upstream: unknown
  constructor (statusCode: number, body: Record<string, unknown>, message: string, upstream?: unknown) {
    super(message)
    this.name = 'UpstreamClientError'
    this.statusCode = statusCode
    this.body = body
    this.upstream = upstream
  }
}

/**
 * A refusal's code as a usage record keeps it: the error body's code when it is a name, else the
 * gateway's own name for the error (`quota_exceeded`, `key_rate_limited`, `insufficient_balance`,
 * where the body's code is the HTTP status); a plugin's refusal keeps the code it gave.
 */
export function refusalCode (err: GatewayError): string {
  const code = err.spec.code
  if (typeof code === 'string') return code
  return err instanceof Refusal ? String(code ?? err.statusCode) : err.key
}

export function isGatewayError (err: unknown): err is GatewayError {
  return err instanceof Error && typeof (err as Partial<GatewayError>).key === 'string' && (err as Partial<GatewayError>).spec !== undefined
}

// Anthropic's error types by status, with the gateway's own choices for 408/502/503 (docs/api.md).
const MESSAGES_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  409: 'invalid_request_error',
  413: 'request_too_large',
  415: 'invalid_request_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  501: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error'
}

export function messagesTypeFor (status: number): string {
  return MESSAGES_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
}

const OPENAI_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'invalid_request_error',
  408: 'timeout_error',
  409: 'invalid_request_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error'
}

export function openaiTypeFor (status: number): string {
  return OPENAI_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
}

// Google's canonical status names by HTTP status, within the eight its Gemini API answers with.
const GEMINI_STATUSES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'RESOURCE_EXHAUSTED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  408: 'DEADLINE_EXCEEDED',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
  529: 'UNAVAILABLE'
}

export function geminiStatusFor (status: number): string {
  return GEMINI_STATUSES[status] ?? (status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT')
}

export type ErrorFamily = 'openai' | 'messages' | 'gemini' | 'mcp'

export interface ErrorBodyInput { status: number, message: string, code?: string | number, openaiType?: string, messagesType?: string, rpc?: number, retryAfter?: number }

// A server error of JSON-RPC's own range for the gateway's refusals, a plugin's included, which
// carry their HTTP status and code in `data`; an error names another code (`rpc`) only when
// JSON-RPC has one that says what happened (content blocked: the call's params)
const REFUSED = -32000

/** An error as JSON-RPC's `error` member: a code, the message, and the gateway's status, code and type in `data`. */
export function jsonRpcError (e: ErrorBodyInput): { code: number, message: string, data: Record<string, unknown> } {
  const data: Record<string, unknown> = { status: e.status, code: e.code ?? e.status, type: e.openaiType ?? openaiTypeFor(e.status) }
  if (e.retryAfter !== undefined) data.retry_after = e.retryAfter
  return { code: e.rpc ?? REFUSED, message: e.message, data }
}

/** The one place that knows the error shapes; also used for in-stream error events. */
export function errorBody (family: ErrorFamily, e: ErrorBodyInput): Record<string, unknown> {
  if (family === 'mcp') return { jsonrpc: '2.0', id: null, error: jsonRpcError(e) }
  if (family === 'gemini') return { error: { code: e.status, message: e.message, status: geminiStatusFor(e.status) } }
  if (family === 'messages') {
    const body: Record<string, unknown> = { type: e.messagesType ?? messagesTypeFor(e.status), message: e.message }
    if (typeof e.code === 'string') body.code = e.code
    return { type: 'error', error: body }
  }
  return { error: { code: e.code ?? e.status, message: e.message, type: e.openaiType ?? openaiTypeFor(e.status) } }
}
