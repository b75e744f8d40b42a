import { parseToolArguments } from '../protocols/content.js'
import { Dropped } from '../protocols/fields.js'
import { finishOf, geminiUpstreamPath, googleError, usageFromGemini, type Finish } from '../protocols/gemini/wire.js'
import { candidatesOf, clientCallId, ContentsBuilder, geminiToolConfig, geminiTools, imagePart, streamError, THINKING_BUDGET, type Piece } from '../protocols/gemini/body.js'
import { geminiAnswer, type GeminiGenerationConfig, type GeminiPart, type GeminiRequest, type GeminiThinkingConfig } from '../protocols/gemini/types.js'
import { isObj } from '../protocols/fields.js'
import { buildResponse, failureCode, ResponseWriter, responsesError, type IncompleteReason, type OutputPart } from '../protocols/responses/writer.js'
import { dropToward, normalise, type Part } from '../protocols/responses/request.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'

// A Responses client in front of a Gemini upstream. Thought summaries come back as reasoning
// items (asked for with reasoning.summary); a function call's thought signature rides in its
// call_id, which Codex and the SDK send back with the call.

const INCOMPLETE: Partial<Record<Finish, IncompleteReason>> = { length: 'max_output_tokens', filter: 'content_filter' }

function part (p: Part): GeminiPart {
  if (p.type === 'text') return { text: p.text }
  // `detail` only tunes OpenAI's image resolution
  if (p.type === 'image') return imagePart(p.url)
  return { inlineData: { mimeType: `audio/${String(p.format)}`, data: p.data } }
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const r = normalise(body, ctx)
  const dropped = r.dropped
  const drop = (name: string): void => { if (!dropped.includes(name)) dropped.push(name) }
  const system: string[] = r.instructions === null ? [] : [r.instructions]
  const contents = new ContentsBuilder()
  for (const turn of r.turns) {
    switch (turn.role) {
      case 'system':
        system.push(turn.text)
        break
      case 'user':
        contents.push('user', turn.parts.map(part))
        break
      case 'assistant':
        contents.push('model', [{ text: turn.text }])
        break
      case 'call':
        contents.push('model', [contents.call(turn.id, turn.name, parseToolArguments(turn.arguments))])
        break
      case 'result': {
        const output = typeof turn.output === 'string' ? turn.output : turn.output.flatMap((p) => p.type === 'text' ? [p.text] : []).join('\n')
        const media = typeof turn.output === 'string' ? [] : turn.output.filter((p) => p.type !== 'text').map(part)
        contents.push('user', [contents.result(turn.id, 'input.function_call_output.call_id', { output }), ...media])
        break
      }
    }
  }

  const out: GeminiRequest = { contents: contents.build() }
  if (system.length > 0) out.systemInstruction = { parts: [{ text: system.join('\n\n') }] }
  if (r.tools.length > 0) {
    out.tools = geminiTools(r.tools)
    if (r.tools.some((t) => t.strict === true)) drop('tools.strict')
    if (r.toolChoice?.mode === 'tool') out.toolConfig = geminiToolConfig('ANY', [r.toolChoice.name])
    else if (r.toolChoice !== undefined) out.toolConfig = geminiToolConfig(r.toolChoice.mode === 'required' ? 'ANY' : r.toolChoice.mode === 'none' ? 'NONE' : 'AUTO')
  }
  if (r.parallelToolCalls === false) drop('parallel_tool_calls')

  const generation: GeminiGenerationConfig = {}
  if (r.temperature !== undefined) generation.temperature = r.temperature
  if (r.topP !== undefined) generation.topP = r.topP
  if (r.maxOutputTokens !== undefined) generation.maxOutputTokens = r.maxOutputTokens
  if (r.stop !== undefined && r.stop.length > 0) generation.stopSequences = r.stop
  if (r.format?.type === 'json_object') generation.responseMimeType = 'application/json'
  else if (r.format?.type === 'json_schema') {
    generation.responseMimeType = 'application/json'
    generation.responseJsonSchema = r.format.schema ?? {}
  }
  const thinking: GeminiThinkingConfig = {}
  if (r.effort !== undefined) {
    const budget = THINKING_BUDGET.get(r.effort)
    if (budget === undefined) drop('reasoning.effort')
    else thinking.thinkingBudget = budget
  }
  // a summary asked for (or generate_summary, its older name) is Gemini's thought summaries
  if (r.summary !== undefined && r.summary !== 'none' && thinking.thinkingBudget !== 0) thinking.includeThoughts = true
  if (Object.keys(thinking).length > 0) generation.thinkingConfig = thinking
  if (Object.keys(generation).length > 0) out.generationConfig = generation
  // Gemini has no field for these (its column of the table), and refuses a field it does not know
  dropToward(r, 'gemini')
  for (const key of Object.keys(r.extra)) drop(key)
  // the names come from the client: made header-safe
  const safe = new Dropped()
  for (const name of dropped) safe.add(name)
  return { body: out, dropped: safe.list() }
}

function outputParts (pieces: Piece[], ctx: TranslateCtx): OutputPart[] {
  const parts: OutputPart[] = []
  let calls = 0
  for (const p of pieces) {
    const last = parts[parts.length - 1]
    if (p.kind === 'call') parts.push({ kind: 'call', id: clientCallId(ctx, 'call_', calls++, p), name: p.name, arguments: JSON.stringify(p.args) })
    else if (p.text === '') continue
    else if (p.kind === 'text' && last?.kind === 'text') last.text += p.text
    else if (p.kind === 'thought' && last?.kind === 'reasoning') last.text += p.text
    else parts.push({ kind: p.kind === 'thought' ? 'reasoning' : 'text', text: p.text })
  }
  return parts
}

function response (body: Json, ctx: TranslateCtx) {
  const answer = geminiAnswer(body)
  const candidate = candidatesOf(answer)[0]
  const parts = candidate === undefined ? [] : outputParts(candidate.pieces, ctx)
  const usage = usageFromGemini(answer.usageMetadata)
  const finish = finishOf(candidate?.finishReason, parts.some((p) => p.kind === 'call'))
  return { body: buildResponse(ctx, parts, INCOMPLETE[finish] ?? null, usage), usage }
}

function stream (ctx: TranslateCtx): StreamMapper {
  const w = new ResponseWriter(ctx)
  let open: { kind: 'text' | 'thought', at: number } | null = null
  let calls = 0
  let usage: Usage | null = null

  const close = (): void => {
    if (open !== null) w.close(open.at)
    open = null
  }
  const piece = (p: Piece): void => {
    if (p.kind === 'call') {
      close()
      const args = JSON.stringify(p.args)
      const at = w.call(clientCallId(ctx, 'call_', calls++, p), p.name)
      w.append(at, args)
      w.close(at)
      return
    }
    if (p.text === '') return
    if (open?.kind !== p.kind) {
      close()
      open = { kind: p.kind, at: p.kind === 'text' ? w.message() : w.reasoning() }
    }
    w.append(open.at, p.text)
  }

  return {
    push (ev: SseEvent): SseEvent[] {
      if (w.ended()) return []
      let data: unknown
      try { data = JSON.parse(ev.data) } catch { return [] }
      if (!isObj(data)) return []
      const chunk = geminiAnswer(data)
      const failure = streamError(chunk)
      if (failure !== null) {
        w.fail({ code: failureCode({ status: failure.status, type: failure.status === 503 ? 'overloaded_error' : undefined }), message: failure.message }, usage)
        return w.take()
      }
      if (chunk.usageMetadata !== undefined) usage = usageFromGemini(chunk.usageMetadata) ?? usage
      w.start()
      const candidate = candidatesOf(chunk).find((c) => c.index === 0)
      if (candidate !== undefined) {
        for (const p of candidate.pieces) piece(p)
        if (candidate.finishReason !== null) {
          close()
          w.finish(INCOMPLETE[finishOf(candidate.finishReason, calls > 0)] ?? null, usage)
        }
      }
      return w.take()
    },
    end: () => w.take(),
    usage: () => usage,
    relayedText: () => w.relayedText(),
    finished: () => w.finished(),
    fail (e) {
      w.fail({ code: failureCode(e), message: e.message }, usage)
      return w.take()
    }
  }
}

const error = (status: number, body: unknown): Json => responsesError(status, googleError(body))

export const responsesToGemini: TranslatorPair = { client: 'responses', upstream: 'gemini', path: geminiUpstreamPath, request, response, error, stream }
