// AWS Bedrock's Converse API on the wire (JSON as Bedrock sends and takes it: bytes are base64
// strings, where the SDK's own types hold Uint8Array). @aws-sdk/client-bedrock-runtime's
// models_0.d.ts shows every shape; only what the gateway writes or reads is typed here.

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

export type ConverseImageFormat = 'png' | 'jpeg' | 'gif' | 'webp'
export type ConverseDocumentFormat = 'pdf' | 'csv' | 'doc' | 'docx' | 'xls' | 'xlsx' | 'html' | 'txt' | 'md'
export type CacheTtl = '5m' | '1h'

export interface CachePoint { cachePoint: { type: 'default', ttl?: CacheTtl } }

export type ToolResultContent =
  | { text: string }
  | { json: JsonValue }
  | { image: ConverseImage }
  | { document: ConverseDocument }

export interface ConverseImage { format: ConverseImageFormat, source: { bytes: string } }
export interface ConverseDocument { format: ConverseDocumentFormat, name: string, source: { bytes: string } | { text: string } }

export type ReasoningContent = { reasoningText: { text: string, signature?: string } } | { redactedContent: string }

export type ContentBlock =
  | { text: string }
  | { image: ConverseImage }
  | { document: ConverseDocument }
  | { toolUse: { toolUseId: string, name: string, input: JsonValue } }
  | { toolResult: { toolUseId: string, content: ToolResultContent[], status?: 'success' | 'error' } }
  | { reasoningContent: ReasoningContent }
  | CachePoint

export interface ConverseMessage { role: 'user' | 'assistant', content: ContentBlock[] }

export type SystemBlock = { text: string } | CachePoint

export interface ToolSpec { toolSpec: { name: string, description?: string, inputSchema: { json: JsonValue } } }

export type ToolChoice = { auto: Record<string, never> } | { any: Record<string, never> } | { tool: { name: string } }

export interface InferenceConfig { maxTokens?: number, temperature?: number, topP?: number, stopSequences?: string[] }

/** The body of `POST /model/{id}/converse` and `/converse-stream` (the model is in the path). */
export interface ConverseRequest {
  messages: ConverseMessage[]
  system?: SystemBlock[]
  inferenceConfig?: InferenceConfig
  toolConfig?: { tools: Array<ToolSpec | CachePoint>, toolChoice?: ToolChoice }
  additionalModelRequestFields?: Record<string, JsonValue>
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'guardrail_intervened' | 'content_filtered'
  | 'malformed_model_output' | 'malformed_tool_use' | 'model_context_window_exceeded'

export interface CacheDetail { ttl: CacheTtl, inputTokens: number }

/** Converse's usage: inputTokens counts the uncached input only; the cache's reads and writes come beside it. */
export interface TokenUsage {
  inputTokens: number
  outputTokens: number
  totalTokens?: number
  cacheReadInputTokens?: number
  cacheWriteInputTokens?: number
  /** The writes split by how long they stay cached. */
  cacheDetails?: CacheDetail[]
}

/** The answer of `/converse`. */
export interface ConverseResponse {
  output: { message: ConverseMessage }
  stopReason: StopReason
  usage: TokenUsage
  metrics?: { latencyMs: number }
}

/** The events of `/converse-stream`, each the JSON payload of one event-stream message named by its `:event-type`. */
export interface ConverseStreamEvents {
  messageStart: { role: 'assistant' }
  contentBlockStart: { contentBlockIndex: number, start: { toolUse: { toolUseId: string, name: string } } }
  contentBlockDelta: { contentBlockIndex: number, delta: { text: string } | { toolUse: { input: string } } | { reasoningContent: { text: string } | { signature: string } | { redactedContent: string } } }
  contentBlockStop: { contentBlockIndex: number }
  messageStop: { stopReason: StopReason }
  metadata: { usage: TokenUsage, metrics?: { latencyMs: number } }
}

/** Bedrock's error body; the error's name comes in `x-amzn-ErrorType` (or `__type` in the body). */
export interface ConverseError { message: string, __type?: string }
