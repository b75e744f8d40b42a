import type { MessageCreateParamsBase } from '@anthropic-ai/sdk/resources/messages'
import type { MessageCreateParamsBase as BetaMessageCreateParamsBase } from '@anthropic-ai/sdk/resources/beta/messages/messages'
import type { Columns, Fate } from '../fields.js'

// Every field of a Messages request (the beta ones included, which Claude Code sends), and its
// fate toward each upstream protocol that is not its own. The SDK no longer types temperature,
// top_p and top_k; the API takes them (`top_k` goes to a Chat Completions upstream only when the
// model lists it). A protocol added is one column more here.

export const MESSAGES_FIELDS: Readonly<Record<keyof MessageCreateParamsBase | keyof BetaMessageCreateParamsBase | 'temperature' | 'top_p' | 'top_k', Columns<'messages'>>> = {
  messages: { openai: 'mapped', gemini: 'mapped' },
  model: { openai: 'mapped', gemini: 'mapped' },
  system: { openai: 'mapped', gemini: 'mapped' },
  stop_sequences: { openai: 'mapped', gemini: 'mapped' },
  metadata: { openai: 'mapped', gemini: 'dropped' },
  tools: { openai: 'mapped', gemini: 'mapped' },
  tool_choice: { openai: 'mapped', gemini: 'mapped' },
  thinking: { openai: 'mapped', gemini: 'mapped' },
  output_config: { openai: 'mapped', gemini: 'mapped' },
  output_format: { openai: 'mapped', gemini: 'mapped' },
  service_tier: { openai: 'mapped', gemini: 'dropped' },
  top_k: { openai: 'mapped', gemini: 'mapped' },
  max_tokens: { openai: 'passed', gemini: 'mapped' },
  stream: { openai: 'passed', gemini: 'mapped' },
  temperature: { openai: 'passed', gemini: 'mapped' },
  top_p: { openai: 'passed', gemini: 'mapped' },
  betas: { openai: 'dropped', gemini: 'dropped' },
  billing_policy: { openai: 'dropped', gemini: 'dropped' },
  cache_control: { openai: 'dropped', gemini: 'dropped' },
  compaction: { openai: 'dropped', gemini: 'dropped' },
  container: { openai: 'dropped', gemini: 'dropped' },
  context_management: { openai: 'dropped', gemini: 'dropped' },
  diagnostics: { openai: 'dropped', gemini: 'dropped' },
  fallback_credit_token: { openai: 'dropped', gemini: 'dropped' },
  fallbacks: { openai: 'dropped', gemini: 'dropped' },
  inference_geo: { openai: 'dropped', gemini: 'dropped' },
  mcp_servers: { openai: 'dropped', gemini: 'dropped' },
  speed: { openai: 'dropped', gemini: 'dropped' },
  thread: { openai: 'dropped', gemini: 'dropped' },
  user_profile_id: { openai: 'dropped', gemini: 'dropped' },
  workspace_id: { openai: 'dropped', gemini: 'dropped' }
}

// A custom tool's fields, toward every other protocol; the others (defer_loading,
// input_examples, allowed_callers…) serve Anthropic's server-side tool machinery. cache_control
// is reported with the other breakpoints.
export const MESSAGES_TOOL_FIELDS: Readonly<Record<string, Fate>> = { type: 'mapped', name: 'mapped', description: 'mapped', input_schema: 'mapped', strict: 'mapped', cache_control: 'mapped' }
