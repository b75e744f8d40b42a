import type { ResponseTextConfig } from 'openai/resources/responses/responses'
import type { Reasoning } from 'openai/resources/shared'
import type { Columns } from '../fields.js'
import type { ResponsesRequest } from './request.js'

// Every field of a Responses request, and its fate toward each upstream protocol that is not its
// own (toward a Responses upstream every field is passed as it is). The reader
// (request.ts) reads a field some column does not drop; one every column drops is
// reported, or sent as it is when the model lists it among its supported parameters (and then
// still dropped toward a Gemini upstream, which refuses a field it does not know). A pair reports
// a field its column drops when the request sets it (`dropToward`). `stop` is no Responses
// field, but costs nothing to honour; `client_metadata` is the Codex CLI's bookkeeping.

type Row = Columns<'responses'>

export const RESPONSES_FIELDS: Readonly<Record<keyof ResponsesRequest, Row>> = {
  model: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  input: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  instructions: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  tools: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  tool_choice: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  parallel_tool_calls: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  max_output_tokens: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  stop: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  text: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  reasoning: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  // encrypted reasoning can only be asked for (no reasoning item the gateway writes has any); any other inclusion is reported
  include: { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  // toward a Chat Completions upstream, only when the model lists it
  metadata: { openai: 'mapped', messages: 'mapped', gemini: 'dropped' },
  prompt_cache_key: { openai: 'mapped', messages: 'dropped', gemini: 'dropped' },
  user: { openai: 'mapped', messages: 'mapped', gemini: 'dropped' },
  safety_identifier: { openai: 'mapped', messages: 'mapped', gemini: 'dropped' },
  stream: { openai: 'passed', messages: 'passed', gemini: 'mapped' },
  temperature: { openai: 'passed', messages: 'passed', gemini: 'mapped' },
  top_p: { openai: 'passed', messages: 'passed', gemini: 'mapped' },
  // nothing is stored; client-side bookkeeping no model sees; stream obfuscation that is never added
  store: { openai: 'accepted', messages: 'accepted', gemini: 'accepted' },
  client_metadata: { openai: 'accepted', messages: 'accepted', gemini: 'accepted' },
  stream_options: { openai: 'accepted', messages: 'accepted', gemini: 'accepted' },
  // a stateless gateway refuses them when set (null, and background false, ask for nothing)
  previous_response_id: { openai: 'refused', messages: 'refused', gemini: 'refused' },
  conversation: { openai: 'refused', messages: 'refused', gemini: 'refused' },
  background: { openai: 'refused', messages: 'refused', gemini: 'refused' },
  // a prompt stored at OpenAI
  prompt: { openai: 'refused', messages: 'refused', gemini: 'refused' },
  // `disabled` is what the gateway does anyway
  truncation: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  context_management: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  moderation: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  prompt_cache_options: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  prompt_cache_retention: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  service_tier: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  top_logprobs: { openai: 'dropped', messages: 'dropped', gemini: 'dropped' }
}

/** `text` and `reasoning`, field by field; a key of either not listed is reported (`reasoning.x`). */
export const RESPONSES_CONFIG_FIELDS: Readonly<Record<`text.${keyof ResponseTextConfig}` | `reasoning.${keyof Reasoning}`, Row>> = {
  // json_schema toward Messages (json_object has no equivalent there: reported)
  'text.format': { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  // toward a Chat Completions upstream, when the model has the setting
  'text.verbosity': { openai: 'mapped', messages: 'dropped', gemini: 'dropped' },
  'reasoning.effort': { openai: 'mapped', messages: 'mapped', gemini: 'mapped' },
  // a way of showing reasoning, not an input of the model; Gemini's thought summaries are asked for
  'reasoning.summary': { openai: 'accepted', messages: 'accepted', gemini: 'mapped' },
  'reasoning.generate_summary': { openai: 'accepted', messages: 'accepted', gemini: 'mapped' },
  'reasoning.context': { openai: 'dropped', messages: 'dropped', gemini: 'dropped' },
  'reasoning.mode': { openai: 'dropped', messages: 'dropped', gemini: 'dropped' }
}
