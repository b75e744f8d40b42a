import type {
  Candidate, Content, FinishReason, FunctionCall, FunctionCallingConfigMode, FunctionDeclaration, GenerateContentResponse,
  GenerateContentResponseUsageMetadata, GenerationConfig, Part, SafetySetting, ThinkingConfig, Tool, ToolConfig
} from '@google/genai'
import type { Json } from '../types.js'

// Google's generateContent on the wire. @google/genai types the SDK's own call (the settings in
// one `config`, the answer a class with getters), not the REST body; its pieces (Content, Part,
// Tool, GenerationConfig...) are the REST shapes but for their enums: JSON holds an enum's
// string ('STOP'), which TypeScript does not take for the enum's member, so each is typed here
// with its enums as their strings.

/** An SDK type as JSON holds it: its enums as their strings (`FinishReason.STOP` is 'STOP'). */
export type WireEnums<T> = T extends string ? `${T}` : T extends ReadonlyArray<infer E> ? Array<WireEnums<E>> : T extends object ? { [K in keyof T]: WireEnums<T[K]> } : T

export type GeminiPart = WireEnums<Part>
export type GeminiContent = WireEnums<Content>
export type GeminiFunctionCall = WireEnums<FunctionCall>
export type GeminiFunctionDeclaration = WireEnums<FunctionDeclaration>
export type GeminiTool = WireEnums<Tool>
export type GeminiToolConfig = WireEnums<ToolConfig>
export type GeminiGenerationConfig = WireEnums<GenerationConfig>
export type GeminiThinkingConfig = WireEnums<ThinkingConfig>
export type GeminiSafetySetting = WireEnums<SafetySetting>
export type GeminiCandidate = WireEnums<Candidate>
export type GeminiUsageMetadata = WireEnums<GenerateContentResponseUsageMetadata>
export type GeminiFinishReason = `${FinishReason}`
export type GeminiToolMode = `${FunctionCallingConfigMode}`

/** A JSON Schema: an object of any keywords (a tool's parameters, a response's schema). */
export type JsonSchema = Record<string, unknown>

// The two bodies are type aliases, not interfaces: a pair hands its bodies on as Json, which an
// interface is not (it may gain members), an object type is.

/** The body of `POST /v1beta/models/{model}:generateContent` (and of streamGenerateContent). */
export type GeminiRequest = {
  contents: GeminiContent[]
  systemInstruction?: GeminiContent
  tools?: GeminiTool[]
  toolConfig?: GeminiToolConfig
  generationConfig?: GeminiGenerationConfig
  safetySettings?: GeminiSafetySetting[]
  /** A context cache stored at Google (`cachedContents/…`). */
  cachedContent?: string
  /** Vertex AI's. */
  labels?: Record<string, string>
  /** The model is the path's; some clients repeat it here. */
  model?: string
}

/** A GenerateContentResponse as JSON carries it (the SDK class's data, not its getters): a whole answer, or a stream chunk with the new parts only. */
export type GeminiResponse = WireEnums<Pick<GenerateContentResponse, 'candidates' | 'usageMetadata' | 'promptFeedback' | 'modelVersion' | 'responseId' | 'createTime'>>

/** A frame of a Gemini stream: a chunk of the answer, or an error after the stream started. */
export type GeminiChunk = GeminiResponse & { error?: unknown }

/**
 * An upstream's answer (or stream chunk) read as the SDK types it: the one place an answer gets
 * its type. It is not trusted for all that: every field the codec and the pairs read is checked
 * first (an object, a string, an array of objects...).
 */
export const geminiAnswer = (body: Json): GeminiChunk => body as GeminiChunk
