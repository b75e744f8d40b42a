import type { Columns } from '../fields.js'
import type { ChatRequest } from './request.js'

// Every field of a Chat Completions request, and its fate toward each upstream protocol that is
// not its own (toward a Chat Completions upstream every field is passed as it is). `top_k` and
// `thinking` are Messages fields some OpenAI-style clients send; they reach a pair only when the
// model lists them. A protocol added is one column more here.

export const CHAT_FIELDS: Readonly<Record<keyof ChatRequest, Columns<'openai'>>> = {
  messages: { messages: 'mapped', gemini: 'mapped' },
  model: { messages: 'mapped', gemini: 'mapped' },
  max_completion_tokens: { messages: 'mapped', gemini: 'mapped' },
  max_tokens: { messages: 'mapped', gemini: 'mapped' },
  n: { messages: 'mapped', gemini: 'mapped' },
  stop: { messages: 'mapped', gemini: 'mapped' },
  user: { messages: 'mapped', gemini: 'dropped' },
  safety_identifier: { messages: 'mapped', gemini: 'dropped' },
  metadata: { messages: 'mapped', gemini: 'dropped' },
  tools: { messages: 'mapped', gemini: 'mapped' },
  tool_choice: { messages: 'mapped', gemini: 'mapped' },
  parallel_tool_calls: { messages: 'mapped', gemini: 'mapped' },
  response_format: { messages: 'mapped', gemini: 'mapped' },
  reasoning_effort: { messages: 'mapped', gemini: 'mapped' },
  service_tier: { messages: 'mapped', gemini: 'dropped' },
  // include_usage is ctx.includeUsage; include_obfuscation pads nothing in a translated stream
  stream_options: { messages: 'mapped', gemini: 'mapped' },
  stream: { messages: 'passed', gemini: 'mapped' },
  temperature: { messages: 'passed', gemini: 'mapped' },
  top_p: { messages: 'passed', gemini: 'mapped' },
  top_k: { messages: 'passed', gemini: 'mapped' },
  thinking: { messages: 'passed', gemini: 'dropped' },
  audio: { messages: 'dropped', gemini: 'dropped' },
  frequency_penalty: { messages: 'dropped', gemini: 'mapped' },
  function_call: { messages: 'dropped', gemini: 'dropped' },
  functions: { messages: 'dropped', gemini: 'dropped' },
  logit_bias: { messages: 'dropped', gemini: 'dropped' },
  logprobs: { messages: 'dropped', gemini: 'dropped' },
  modalities: { messages: 'dropped', gemini: 'dropped' },
  moderation: { messages: 'dropped', gemini: 'dropped' },
  prediction: { messages: 'dropped', gemini: 'dropped' },
  presence_penalty: { messages: 'dropped', gemini: 'mapped' },
  prompt_cache_key: { messages: 'dropped', gemini: 'dropped' },
  prompt_cache_options: { messages: 'dropped', gemini: 'dropped' },
  prompt_cache_retention: { messages: 'dropped', gemini: 'dropped' },
  seed: { messages: 'dropped', gemini: 'mapped' },
  store: { messages: 'dropped', gemini: 'dropped' },
  top_logprobs: { messages: 'dropped', gemini: 'dropped' },
  verbosity: { messages: 'dropped', gemini: 'dropped' },
  // a server-side search the gateway would not meter
  web_search_options: { messages: 'dropped', gemini: 'dropped' }
}
