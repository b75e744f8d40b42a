import type { GenerationConfig, ThinkingConfig } from '@google/genai'
import type { Columns } from '../fields.js'

// Every field of a Gemini generateContent request, and its fate toward each upstream protocol
// that is not its own (toward a Gemini upstream every field is passed as it is). The reader
// (request.ts) reads a field some column does not drop and reports one every column drops
// (an empty list, or a value asking for no more than the default, goes unreported); a pair
// reports a field its column drops when the request sets it (`dropToward`). The SDK types the
// REST body's generationConfig, not its top level; `labels` is Vertex AI's.

type Row = Columns<'gemini'>

export const GEMINI_FIELDS: Readonly<Record<'contents' | 'systemInstruction' | 'tools' | 'toolConfig' | 'generationConfig' | 'model' | 'safetySettings' | 'cachedContent' | 'labels', Row>> = {
  contents: { openai: 'mapped', messages: 'mapped' },
  systemInstruction: { openai: 'mapped', messages: 'mapped' },
  tools: { openai: 'mapped', messages: 'mapped' },
  toolConfig: { openai: 'mapped', messages: 'mapped' },
  generationConfig: { openai: 'mapped', messages: 'mapped' },
  // named by the path, not the body
  model: { openai: 'mapped', messages: 'mapped' },
  // a context cache stored at Google
  cachedContent: { openai: 'refused', messages: 'refused' },
  // Google's own thresholds
  safetySettings: { openai: 'dropped', messages: 'dropped' },
  labels: { openai: 'dropped', messages: 'dropped' }
}

/** generationConfig, field by field (reported as `generationConfig.name`). */
export const GEMINI_GENERATION_FIELDS: Readonly<Record<keyof GenerationConfig, Row>> = {
  temperature: { openai: 'mapped', messages: 'mapped' },
  topP: { openai: 'mapped', messages: 'mapped' },
  // toward Chat Completions only when the model lists top_k (vLLM, SGLang)
  topK: { openai: 'mapped', messages: 'mapped' },
  maxOutputTokens: { openai: 'mapped', messages: 'mapped' },
  stopSequences: { openai: 'mapped', messages: 'mapped' },
  // Messages answers one candidate: more is a 400
  candidateCount: { openai: 'mapped', messages: 'refused' },
  presencePenalty: { openai: 'mapped', messages: 'dropped' },
  frequencyPenalty: { openai: 'mapped', messages: 'dropped' },
  seed: { openai: 'mapped', messages: 'dropped' },
  responseMimeType: { openai: 'mapped', messages: 'mapped' },
  responseSchema: { openai: 'mapped', messages: 'mapped' },
  responseJsonSchema: { openai: 'mapped', messages: 'mapped' },
  thinkingConfig: { openai: 'mapped', messages: 'mapped' },
  responseLogprobs: { openai: 'dropped', messages: 'dropped' },
  logprobs: { openai: 'dropped', messages: 'dropped' },
  responseModalities: { openai: 'dropped', messages: 'dropped' },
  responseFormat: { openai: 'dropped', messages: 'dropped' },
  speechConfig: { openai: 'dropped', messages: 'dropped' },
  audioTimestamp: { openai: 'dropped', messages: 'dropped' },
  audioTranscriptionConfig: { openai: 'dropped', messages: 'dropped' },
  translationConfig: { openai: 'dropped', messages: 'dropped' },
  mediaResolution: { openai: 'dropped', messages: 'dropped' },
  routingConfig: { openai: 'dropped', messages: 'dropped' },
  modelSelectionConfig: { openai: 'dropped', messages: 'dropped' },
  enableAffectiveDialog: { openai: 'dropped', messages: 'dropped' },
  enableEnhancedCivicAnswers: { openai: 'dropped', messages: 'dropped' }
}

/** generationConfig.thinkingConfig, field by field. */
export const GEMINI_THINKING_FIELDS: Readonly<Record<keyof ThinkingConfig, Row>> = {
  includeThoughts: { openai: 'mapped', messages: 'mapped' },
  thinkingBudget: { openai: 'mapped', messages: 'mapped' },
  thinkingLevel: { openai: 'mapped', messages: 'mapped' }
}
