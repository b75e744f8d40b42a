import type { Fate } from '../fields.js'
import type { MessagesRequest } from './request.js'

// Every field of a Messages request (the beta ones included, which Claude Code sends), and its
// fate toward each upstream protocol that is not its own. The SDK no longer types temperature,
// top_p and top_k; the API takes them (`top_k` goes to a Chat Completions upstream only when the
// model lists it). A protocol added is one column more here. Converse is reached from every
// client protocol through Messages, so its column is here only: `top_k` and `thinking` go in its
// additionalModelRequestFields where the model takes them (an Anthropic model), else are dropped.

export const MESSAGES_FIELDS: Readonly<Record<keyof MessagesRequest, { openai: Fate, gemini: Fate, converse: Fate }>> = {
  messages: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  model: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  system: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  stop_sequences: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  metadata: { openai: 'mapped', gemini: 'dropped', converse: 'dropped' },
  tools: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  tool_choice: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  thinking: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  output_config: { openai: 'mapped', gemini: 'mapped', converse: 'dropped' },
  output_format: { openai: 'mapped', gemini: 'mapped', converse: 'dropped' },
  service_tier: { openai: 'mapped', gemini: 'dropped', converse: 'dropped' },
  top_k: { openai: 'mapped', gemini: 'mapped', converse: 'mapped' },
  max_tokens: { openai: 'passed', gemini: 'mapped', converse: 'mapped' },
  stream: { openai: 'passed', gemini: 'mapped', converse: 'mapped' },
  temperature: { openai: 'passed', gemini: 'mapped', converse: 'mapped' },
  top_p: { openai: 'passed', gemini: 'mapped', converse: 'mapped' },
  betas: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  billing_policy: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  cache_control: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  compaction: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  container: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  context_management: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  diagnostics: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  fallback_credit_token: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  fallbacks: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  inference_geo: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  mcp_servers: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  speed: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  thread: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  user_profile_id: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' },
  workspace_id: { openai: 'dropped', gemini: 'dropped', converse: 'dropped' }
}

// A custom tool's fields, toward every other protocol; the others (defer_loading,
// input_examples, allowed_callers…) serve Anthropic's server-side tool machinery. cache_control
// is reported with the other breakpoints.
export const MESSAGES_TOOL_FIELDS: Readonly<Record<string, Fate>> = { type: 'mapped', name: 'mapped', description: 'mapped', input_schema: 'mapped', strict: 'mapped', cache_control: 'mapped' }
