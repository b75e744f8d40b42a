import type {
  CacheDetail as SdkCacheDetail,
  ContentBlock,
  ConverseRequest,
  ConverseResponse,
  ConverseStreamOutput,
  DocumentBlock,
  ImageBlock,
  Message,
  SystemContentBlock,
  TokenUsage as SdkTokenUsage,
  Tool,
  ToolChoice as SdkToolChoice,
  ToolResultBlock,
  ToolResultContentBlock,
  ToolSpecification
} from '@aws-sdk/client-bedrock-runtime'

// AWS Bedrock's Converse API on the wire, derived from @aws-sdk/client-bedrock-runtime's own
// types. The SDK's shapes are what its client hands a caller; the JSON Bedrock sends and takes
// differs in three ways, which Wire<> maps: bytes are base64 strings (Uint8Array in the SDK),
// dates are strings, and a union never holds the SDK's `$unknown` catch-all member.

/** A free JSON value (a tool's input or schema, additionalModelRequestFields): the SDK's document type. */
export type JsonDocument = NonNullable<ConverseRequest['additionalModelRequestFields']>

/** An SDK shape as JSON carries it. A JSON document is kept as it is (walking its recursive type gains nothing). */
export type Wire<T> = [JsonDocument] extends [T] ? T : WireOf<T>

type WireOf<T> =
  T extends { $unknown: unknown } ? never
    : T extends Uint8Array ? string
      : T extends Date ? string
        : T extends ReadonlyArray<infer U> ? Array<Wire<U>>
          : T extends object ? { [K in keyof T as K extends '$unknown' ? never : K]: Wire<T[K]> }
            : T

/**
 * The SDK marks nearly every member `| undefined`, required ones too; a shape the gateway writes
 * whole (or has checked whole) says so by taking that off.
 */
export type Filled<T> = { [K in keyof T]: Exclude<T[K], undefined> }

export type ConverseImage = Filled<Wire<ImageBlock>>
export type ConverseDocument = Wire<DocumentBlock>
export type ConverseDocumentFormat = NonNullable<DocumentBlock['format']>
export type CachePoint = Wire<ContentBlock.CachePointMember>
export type ToolResultContent = Wire<ToolResultContentBlock>
export type ToolResult = Wire<ToolResultBlock>
export type ConverseContentBlock = Wire<ContentBlock>
export type SystemBlock = Wire<SystemContentBlock>
export type ToolSpec = Wire<Tool.ToolSpecMember>
export type ToolSpecBody = Wire<ToolSpecification>
export type ToolChoice = Wire<SdkToolChoice>
export type ToolEntry = Wire<Tool>

/** A turn of the conversation, as the writer builds it: its role and its blocks always there. */
export type ConverseMessage = Filled<Wire<Message>>

/** The body of `POST /model/{id}/converse` and `/converse-stream`: the model is in the path, not the body. */
export type ConverseBody = Wire<Omit<ConverseRequest, 'modelId'>>

/** The answer of `/converse`, as Bedrock sends it (read field by field: an upstream is not trusted for its shape). */
export type ConverseAnswer = Wire<ConverseResponse>

export type { StopReason } from '@aws-sdk/client-bedrock-runtime'

/** A cache write's share by how long it stays cached, as read from an answer's usage. */
export type CacheDetail = Filled<Wire<SdkCacheDetail>>

/**
 * Converse's usage as the gateway reads it (readTokenUsage): inputTokens counts the uncached
 * input only; the cache's reads and writes come beside it, the writes split by TTL in cacheDetails.
 */
export interface TokenUsage extends Filled<Pick<Wire<SdkTokenUsage>, 'inputTokens' | 'outputTokens'>>, Pick<Wire<SdkTokenUsage>, 'cacheReadInputTokens' | 'cacheWriteInputTokens'> {
  cacheDetails?: CacheDetail[]
}

type StreamEventName = 'messageStart' | 'contentBlockStart' | 'contentBlockDelta' | 'contentBlockStop' | 'messageStop' | 'metadata'

/**
 * The events of `/converse-stream`, by name: each the JSON payload of one event-stream message
 * whose `:event-type` is that name (the SDK's ConverseStreamOutput holds one as `{[name]: payload}`).
 * Its exceptions are messages of another type, read apart.
 */
export type ConverseStreamEvents = { [K in StreamEventName]: Wire<Extract<ConverseStreamOutput, Record<K, unknown>>[K]> }
