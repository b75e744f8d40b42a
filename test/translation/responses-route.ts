import { ResponsesBody } from '../../engine/gateway/request-schemas.js'
import { validBody } from '../../engine/gateway/validation.js'
import { refuseStateful } from '../../engine/protocols/responses/request.js'
import type { Json } from '../../engine/translation/types.js'

/** What POST /v1/responses checks of a body before anything is forwarded: its schema, then that it asks for no stored state. */
export function checkResponsesBody (body: unknown): Json {
  const valid = validBody(ResponsesBody, body)
  refuseStateful(valid)
  return valid
}
