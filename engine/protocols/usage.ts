import type { Usage } from './types.js'

// The normalised usage's own helpers; each protocol reads and writes its usage in its codec
// (chat/usage.ts, messages/usage.ts, responses/writer.ts, gemini/wire.ts).

/** Usage with the uses of server tools counted in it (a zero usage when there was none). */
export function withServerTools (usage: Usage | null, uses: Readonly<Record<string, number>> | null): Usage | null {
  if (uses === null) return usage
  const base: Usage = usage ?? { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 }
  return { ...base, server_tools: { ...base.server_tools, ...uses } }
}
