// English is the reference catalog: every message the gateway produces has a key here, and every
// other locale must translate every key (test/plugins/i18n.test.ts fails otherwise).
// Placeholders are {name}; they are filled from the error's params and never translated.
export const en = {
  invalid_json: 'The request body is not valid JSON.',
  invalid_body: 'The request body must be a JSON object.',
  unsupported_media_type: 'Content-Type must be application/json.',
  missing_field: 'Missing required field: {field}.',
  invalid_field: 'Invalid value for {field}: {reason}',
  invalid_video_url: 'video_url must be a public http:// or https:// URL; data:, file:, blob:, private addresses and file references are not accepted.',
  invalid_image_url: '{field} must be a public http:// or https:// URL, or a data: URI of an image where image_url allows one; other schemes, private or internal hosts and URLs with credentials are not accepted.',
  body_too_deep: 'The request body nests JSON values more than {max} levels deep.',
  invalid_url: 'The request URL is not valid: it has a malformed percent-encoded sequence.',
  malformed_request: 'The request is not valid HTTP.',
  client_timeout: 'The request was not received in full within {seconds} s.',
  url_too_long: 'A path segment of the request URL is longer than {max} characters.',
  headers_too_large: 'The request headers are larger than {max_kb} KB.',
  modality_not_supported: 'The model {model} does not accept {modality} input.',
  unsupported_on_upstream: '{feature} is not supported for the model {model}.',
  invalid_limit: 'limit must be an integer from 1 to 1000.',
  missing_model_id: 'A model id is required: GET /v1/models/{id}.',
  unauthorized: 'Invalid or missing API key.',
  insufficient_balance: 'Insufficient balance: the organization {org} cannot pay for this request. Add credits and try again.',
  no_org_context: 'This API key has no organization context; the balance check requires one.',
  model_not_found: 'The model {model} does not exist or is not available to this API key.',
  route_not_found: 'No route matches {method} {url}.',
  request_timeout: 'The upstream provider did not answer within {seconds} s.',
  stream_idle_timeout: 'The upstream stream was idle for more than {seconds} s.',
  duplicate_request: 'A request with this idempotency key was already received.',
  request_too_large: 'The request body exceeds the limit of {limit_mb} MB.',
  quota_exceeded: 'Usage quota exceeded for {scope} {id}: {used} of {limit} {unit} this {per}. Retry after {retry_after} s.',
  rate_limited: 'You are being rate limited.',
  not_implemented: 'This endpoint is not available yet.',
  upstream_unavailable: 'No upstream provider could serve the request.',
  upstream_stream_error: 'The upstream provider failed while streaming the response.',
  no_provider: 'The service is temporarily unavailable: no upstream provider is usable for the model {model}.',
  internal: 'Internal error. Quote the trace id {trace_id} to support.',
  admin_unauthorized: 'Invalid or missing admin token.',
  org_not_found: 'Organization {org} not found.',
  key_not_found: 'API key {id} not found.',
  invalid_cursor: 'The cursor is not valid.',
  invalid_query: 'Invalid query parameter {param}: {reason}'
} as const

export type MessageKey = keyof typeof en
export type Catalog = Record<MessageKey, string>
