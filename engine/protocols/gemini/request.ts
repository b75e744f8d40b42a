import { InvalidField, InvalidImageUrl, InvalidVideoUrl, MissingField, UnsupportedOnUpstream } from '../../kernel/errors.js'
import { mediaUrlProblem } from '../../gateway/media-url.js'
import { Dropped, entry, isObj, list, optBoolean, optEntry, optText, read, readFields, strings, text, type Fate } from '../fields.js'
import { schemaFromGemini, unpackThinking, type PackedThinking } from './wire.js'
import type { ToolSpec } from './body.js'
import type { GeminiFunctionCall, JsonSchema } from './types.js'
import { GEMINI_FIELDS, GEMINI_GENERATION_FIELDS, GEMINI_THINKING_FIELDS } from './table.js'
import type { Json, TranslateCtx } from '../types.js'

// A Gemini client's request read into one neutral shape that both translated pairs (towards
// Chat Completions and towards Messages) build their upstream body from. Every field's fate
// toward each upstream protocol is in table.ts: the reader reads what a column keeps and
// reports what every column drops, each pair what its own column drops (`dropToward`); a wrong
// type is a 400 naming the field's path.
//
// Function calls and their results: Google's older calls carry no id, so a result is paired
// with a call of the model turn just before it, by id when both have one (the Gemini CLI gives
// its results ids of its own), else by name in order. A call without an id gets one from its
// position in the conversation, the same on every request that repeats the history.

export type InPart =
  | { kind: 'text', text: string }
  | { kind: 'inline', mimeType: string, data: string }
  /** fileData: its URL checked like every media URL, its MIME type given or guessed. */
  | { kind: 'file', mimeType: string, uri: string }
  | { kind: 'call', id: string, name: string, args: NonNullable<GeminiFunctionCall['args']> }
  | { kind: 'result', id: string, name: string, output: string, isError: boolean, media: Array<Extract<InPart, { kind: 'inline' | 'file' }>> }
  /** Anthropic thinking blocks the gateway gave this client in a thoughtSignature, before the part that carried them. */
  | { kind: 'thinking', blocks: PackedThinking[] }

export interface InTurn { role: 'user' | 'model', parts: InPart[] }

/** A Gemini client's request as the reader leaves it for the pairs. */
export interface InRequest {
  system: string | null
  turns: InTurn[]
  tools: ToolSpec[]
  /** functionCallingConfig: AUTO, ANY or NONE, and the only functions it may call. */
  toolMode?: 'AUTO' | 'ANY' | 'NONE'
  allowed?: string[]
  temperature?: number
  topP?: number
  topK?: number
  maxOutputTokens?: number
  stop?: string[]
  candidateCount?: number
  presencePenalty?: number
  frequencyPenalty?: number
  seed?: number
  format?: { type: 'json_object' } | { type: 'json_schema', schema: JsonSchema }
  /** thinkingConfig: a budget (-1 dynamic, 0 none), or a level (`low`, `high`…). */
  thinking?: { budget?: number, level?: string }
  /** thinkingConfig.includeThoughts: the client shows thought summaries. */
  includeThoughts: boolean
  dropped: Dropped
}

/** Whether the client asked to see thought summaries (a pair reads it back in response() and stream()). */
export function includeThoughts (ctx: TranslateCtx): boolean {
  const config = ctx.clientRequest?.generationConfig
  return isObj(config) && isObj(config.thinkingConfig) && config.thinkingConfig.includeThoughts === true
}

function optNumber (v: unknown, field: string): number | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new InvalidField({ field, reason: 'must be a number' })
  return v
}

function optInt (v: unknown, field: string, min?: number): number | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || (min !== undefined && v < min)) {
    throw new InvalidField({ field, reason: min === undefined ? 'must be an integer' : min === 1 ? 'must be a positive integer' : `must be an integer >= ${min}` })
  }
  return v
}

const EXTENSIONS: Array<[RegExp, string]> = [
  [/\.png$/i, 'image/png'], [/\.jpe?g$/i, 'image/jpeg'], [/\.gif$/i, 'image/gif'], [/\.webp$/i, 'image/webp'],
  [/\.pdf$/i, 'application/pdf'], [/\.(mp4|mov|webm|mpe?g|avi)$/i, 'video/mp4']
]

/** The MIME type of a fileData: given, else from the URL (a YouTube link is a video), else an image. */
export function fileType (given: string | undefined, uri: string): string {
  if (given !== undefined && given !== '') return given
  let path = uri
  try {
    const url = new URL(uri)
    if (/(^|\.)youtube\.com$|^youtu\.be$/i.test(url.hostname)) return 'video/mp4'
    path = url.pathname
  } catch {}
  return EXTENSIONS.find(([re]) => re.test(path))?.[1] ?? 'image/jpeg'
}

function filePart (part: Json, at: string): Extract<InPart, { kind: 'file' }> {
  const file = entry(part.fileData, `${at}.fileData`)
  const uri = text(file.fileUri, `${at}.fileData.fileUri`)
  const mimeType = fileType(optText(file.mimeType, `${at}.fileData.mimeType`), uri)
  if (mediaUrlProblem(uri, 'none') !== undefined) {
    if (mimeType.startsWith('video/')) throw new InvalidVideoUrl()
    throw new InvalidImageUrl({ field: `${at}.fileData.fileUri` })
  }
  return { kind: 'file', mimeType, uri }
}

function inlinePart (part: Json, at: string): Extract<InPart, { kind: 'inline' }> {
  const blob = entry(part.inlineData, `${at}.inlineData`)
  return { kind: 'inline', mimeType: text(blob.mimeType, `${at}.inlineData.mimeType`), data: text(blob.data, `${at}.inlineData.data`) }
}

/** A functionResponse's `response` as text: its `output` (or `error`) when that is all it has, else the whole object as JSON. */
function resultText (response: Json): { output: string, isError: boolean } {
  const keys = Object.keys(response)
  const only = keys.length === 1 ? keys[0] as string : undefined
  if (only === 'output' || only === 'error' || only === 'result' || only === 'content') {
    const v = response[only]
    return { output: typeof v === 'string' ? v : JSON.stringify(v) ?? '', isError: only === 'error' }
  }
  if (keys.length === 2 && keys.includes('output') && keys.includes('error')) {
    const v = response.error
    if (v !== null && v !== undefined && v !== '') return { output: typeof v === 'string' ? v : JSON.stringify(v), isError: true }
  }
  return { output: JSON.stringify(response), isError: false }
}

// The data fields of a Part; one of them is set in each part.
const DATA = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult']

function readPart (raw: unknown, at: string, role: 'user' | 'model', dropped: Dropped): InPart[] {
  const part = entry(raw, at)
  const out: InPart[] = []
  const blocks = role === 'model' ? unpackThinking(part.thoughtSignature) : null
  if (blocks !== null && blocks.length > 0) out.push({ kind: 'thinking', blocks })
  optBoolean(part.thought, `${at}.thought`)
  const kind = DATA.find((k) => part[k] !== undefined && part[k] !== null)
  switch (kind) {
    case 'text': {
      const t = text(part.text, `${at}.text`)
      // a thought summary is the model's own, shown to the user: no model takes it back as input
      if (part.thought !== true && t !== '') out.push({ kind: 'text', text: t })
      break
    }
    case 'inlineData':
      out.push(inlinePart(part, at))
      break
    case 'fileData':
      out.push(filePart(part, at))
      break
    case 'functionCall': {
      if (role !== 'model') throw new InvalidField({ field: `${at}.functionCall`, reason: 'is only allowed in a model turn' })
      const fc = entry(part.functionCall, `${at}.functionCall`)
      out.push({ kind: 'call', id: optText(fc.id, `${at}.functionCall.id`) ?? '', name: text(fc.name, `${at}.functionCall.name`), args: optEntry(fc.args, `${at}.functionCall.args`) ?? {} })
      break
    }
    case 'functionResponse': {
      if (role !== 'user') throw new InvalidField({ field: `${at}.functionResponse`, reason: 'is only allowed in a user turn' })
      const fr = entry(part.functionResponse, `${at}.functionResponse`)
      const media: Array<Extract<InPart, { kind: 'inline' | 'file' }>> = []
      for (const [k, p] of list(fr.parts, `${at}.functionResponse.parts`).entries()) {
        const pat = `${at}.functionResponse.parts[${k}]`
        const sub = entry(p, pat)
        if (sub.inlineData !== undefined && sub.inlineData !== null) media.push(inlinePart(sub, pat))
        else if (sub.fileData !== undefined && sub.fileData !== null) media.push(filePart(sub, pat))
        else dropped.add('contents.functionResponse.parts')
      }
      out.push({
        kind: 'result',
        id: optText(fr.id, `${at}.functionResponse.id`) ?? '',
        name: text(fr.name, `${at}.functionResponse.name`),
        ...resultText(optEntry(fr.response, `${at}.functionResponse.response`) ?? {}),
        media
      })
      break
    }
    case 'executableCode':
    case 'codeExecutionResult':
      dropped.add(`contents.${kind}`) // Google's built-in code execution: no other upstream runs it
      break
    default:
      if (part.thoughtSignature === undefined) throw new InvalidField({ field: at, reason: 'must have text, inlineData, fileData, functionCall or functionResponse' })
  }
  return out
}

/** The id of each call and the call each result answers (see the file's header). */
function pair (turns: InTurn[], at: Array<Array<string>>): void {
  let pending: Array<Extract<InPart, { kind: 'call' }>> = []
  turns.forEach((turn, i) => {
    if (turn.role === 'model') {
      pending = []
      turn.parts.forEach((p, j) => {
        if (p.kind !== 'call') return
        if (p.id === '') p.id = `call_${i}_${j}`
        pending.push(p)
      })
      return
    }
    turn.parts.forEach((p, j) => {
      if (p.kind !== 'result') return
      const byId = p.id === '' ? -1 : pending.findIndex((c) => c.id === p.id)
      const k = byId !== -1 ? byId : pending.findIndex((c) => c.name === p.name)
      if (k === -1) throw new InvalidField({ field: `${at[i]?.[j] ?? `contents[${i}]`}.functionResponse`, reason: `answers no functionCall named ${p.name} in the model turn before it` })
      const [call] = pending.splice(k, 1) as [Extract<InPart, { kind: 'call' }>]
      p.id = call.id
    })
  })
}

const ROLES = new Set(['user', 'model', 'function'])

function readContents (body: Json, dropped: Dropped): InTurn[] {
  const raw = list(body.contents, 'contents')
  if (raw.length === 0) throw new MissingField({ field: 'contents' })
  const turns: InTurn[] = []
  // where each part came from, for the field a pairing error names
  const at: string[][] = []
  for (const [i, c] of raw.entries()) {
    const content = entry(c, `contents[${i}]`)
    const role = optText(content.role, `contents[${i}].role`) ?? 'user'
    if (!ROLES.has(role)) throw new InvalidField({ field: `contents[${i}].role`, reason: 'must be user or model' })
    // `function` is the role older clients gave function responses
    const r = role === 'model' ? 'model' : 'user'
    const parts: InPart[] = []
    const where: string[] = []
    for (const [j, p] of list(content.parts, `contents[${i}].parts`).entries()) {
      for (const part of readPart(p, `contents[${i}].parts[${j}]`, r, dropped)) {
        parts.push(part)
        where.push(`contents[${i}].parts[${j}]`)
      }
    }
    turns.push({ role: r, parts })
    at.push(where)
  }
  pair(turns, at)
  return turns
}

function readSystem (body: Json, dropped: Dropped): string | null {
  const s = body.systemInstruction
  if (s === undefined || s === null) return null
  if (typeof s === 'string') return s === '' ? null : s
  const content = entry(s, 'systemInstruction')
  const texts: string[] = []
  for (const [i, raw] of list(content.parts, 'systemInstruction.parts').entries()) {
    const part = entry(raw, `systemInstruction.parts[${i}]`)
    if (part.text !== undefined && part.text !== null) texts.push(text(part.text, `systemInstruction.parts[${i}].text`))
    else dropped.add(`systemInstruction.${Object.keys(part)[0] ?? 'part'}`)
  }
  const joined = texts.filter((t) => t !== '').join('\n')
  return joined === '' ? null : joined
}

function readTools (body: Json, out: InRequest): void {
  for (const [i, raw] of list(body.tools, 'tools').entries()) {
    const tool = entry(raw, `tools[${i}]`)
    for (const key of Object.keys(tool)) {
      if (tool[key] === null || tool[key] === undefined) continue
      if (key !== 'functionDeclarations') { out.dropped.add(`tools.${key}`); continue } // Google Search, code execution, URL context… run at Google only
      for (const [j, d] of list(tool.functionDeclarations, `tools[${i}].functionDeclarations`).entries()) {
        const at = `tools[${i}].functionDeclarations[${j}]`
        const decl = entry(d, at)
        const spec: ToolSpec = { name: text(decl.name, `${at}.name`) }
        const description = optText(decl.description, `${at}.description`)
        if (description !== undefined) spec.description = description
        const jsonSchema = optEntry(decl.parametersJsonSchema, `${at}.parametersJsonSchema`)
        const schema = optEntry(decl.parameters, `${at}.parameters`)
        if (jsonSchema !== undefined) spec.parameters = jsonSchema
        else if (schema !== undefined) spec.parameters = schemaFromGemini(schema)
        for (const extra of ['response', 'responseJsonSchema', 'behavior']) {
          if (decl[extra] !== undefined && decl[extra] !== null) out.dropped.add(`tools.functionDeclarations.${extra}`)
        }
        out.tools.push(spec)
      }
    }
  }
  const config = optEntry(body.toolConfig, 'toolConfig')
  if (config === undefined) return
  for (const key of Object.keys(config)) if (key !== 'functionCallingConfig' && config[key] !== null) out.dropped.add(`toolConfig.${key}`)
  const fc = optEntry(config.functionCallingConfig, 'toolConfig.functionCallingConfig')
  if (fc === undefined) return
  const mode = optText(fc.mode, 'toolConfig.functionCallingConfig.mode')
  if (mode === 'AUTO' || mode === 'ANY' || mode === 'NONE') out.toolMode = mode
  else if (mode === 'VALIDATED') {
    // calls checked against their schemas: the mode maps, the checking does not
    out.toolMode = 'AUTO'
    out.dropped.add('toolConfig.functionCallingConfig.mode')
  } else if (mode !== undefined && mode !== 'MODE_UNSPECIFIED') {
    throw new InvalidField({ field: 'toolConfig.functionCallingConfig.mode', reason: 'must be AUTO, ANY, NONE or VALIDATED' })
  }
  if (fc.allowedFunctionNames !== undefined && fc.allowedFunctionNames !== null) {
    out.allowed = strings(fc.allowedFunctionNames, 'toolConfig.functionCallingConfig.allowedFunctionNames')
  }
}

// Values that ask for nothing beyond the default: dropping them loses nothing.
const NEUTRAL = new Map([
  ['candidateCount', '1'],
  ['presencePenalty', '0'],
  ['frequencyPenalty', '0'],
  ['responseLogprobs', 'false'],
  ['responseModalities', '["TEXT"]'],
  ['enableEnhancedCivicAnswers', 'false']
])

type Upstream = 'openai' | 'messages'
type Row = Readonly<Record<Upstream, Fate>>
// what some column keeps, read below; a field every column drops is reported
const READ = readFields(GEMINI_FIELDS)
const READ_GENERATION = readFields(GEMINI_GENERATION_FIELDS)
const READ_THINKING = readFields(GEMINI_THINKING_FIELDS)

function readGeneration (body: Json, out: InRequest): void {
  const g = optEntry(body.generationConfig, 'generationConfig')
  if (g === undefined) return
  const at = (k: string): string => `generationConfig.${k}`
  for (const key of Object.keys(g)) {
    const v = g[key]
    if (v === null || v === undefined || READ_GENERATION.has(key)) continue
    if (NEUTRAL.get(key) !== JSON.stringify(v)) out.dropped.add(at(key))
  }
  const set = <K extends keyof InRequest>(key: K, value: InRequest[K] | undefined): void => { if (value !== undefined) out[key] = value }
  set('temperature', optNumber(g.temperature, at('temperature')))
  set('topP', optNumber(g.topP, at('topP')))
  set('topK', optNumber(g.topK, at('topK')))
  set('maxOutputTokens', optInt(g.maxOutputTokens, at('maxOutputTokens'), 1))
  set('candidateCount', optInt(g.candidateCount, at('candidateCount'), 1))
  set('presencePenalty', optNumber(g.presencePenalty, at('presencePenalty')))
  set('frequencyPenalty', optNumber(g.frequencyPenalty, at('frequencyPenalty')))
  set('seed', optInt(g.seed, at('seed')))
  if (g.stopSequences !== undefined && g.stopSequences !== null) {
    const stop = strings(g.stopSequences, at('stopSequences')).filter((s) => s !== '')
    if (stop.length > 0) out.stop = stop
  }

  const mime = optText(g.responseMimeType, at('responseMimeType'))
  const jsonSchema = optEntry(g.responseJsonSchema, at('responseJsonSchema'))
  const schema = optEntry(g.responseSchema, at('responseSchema'))
  if (jsonSchema !== undefined) out.format = { type: 'json_schema', schema: jsonSchema }
  else if (schema !== undefined) out.format = { type: 'json_schema', schema: schemaFromGemini(schema) as JsonSchema }
  else if (mime === 'application/json') out.format = { type: 'json_object' }
  if (mime !== undefined && mime !== 'text/plain' && mime !== 'application/json') out.dropped.add(at('responseMimeType'))

  const thinking = optEntry(g.thinkingConfig, at('thinkingConfig'))
  if (thinking !== undefined) {
    out.includeThoughts = optBoolean(thinking.includeThoughts, at('thinkingConfig.includeThoughts')) === true
    const budget = optInt(thinking.thinkingBudget, at('thinkingConfig.thinkingBudget'), -1)
    const level = optText(thinking.thinkingLevel, at('thinkingConfig.thinkingLevel'))?.toLowerCase()
    if (budget !== undefined || level !== undefined) {
      out.thinking = {}
      if (budget !== undefined) out.thinking.budget = budget
      if (level !== undefined && level !== 'thinking_level_unspecified') out.thinking.level = level
    }
    for (const key of Object.keys(thinking)) {
      if (!READ_THINKING.has(key) && thinking[key] !== null) out.dropped.add(at(`thinkingConfig.${key}`))
    }
  }
}

export function readGeminiRequest (body: Json, ctx: TranslateCtx): InRequest {
  if (body.cachedContent !== undefined && body.cachedContent !== null) throw new UnsupportedOnUpstream({ feature: 'Cached content (cachedContent)', model: ctx.model })
  const out: InRequest = { system: null, turns: [], tools: [], includeThoughts: false, dropped: new Dropped() }
  for (const key of Object.keys(body)) {
    const v = body[key]
    // read below (cachedContent refused above); the rest no column keeps
    if (READ.has(key) || v === null || v === undefined) continue
    // safety thresholds are Google's own; an empty list asks for nothing
    if (Array.isArray(v) && v.length === 0) continue
    out.dropped.add(key)
  }
  out.system = readSystem(body, out.dropped)
  out.turns = readContents(body, out.dropped)
  readTools(body, out)
  readGeneration(body, out)
  return out
}

// A generationConfig field some column drops and the reader reads, as the request sets it
// (undefined: not set)
const SETTINGS: Readonly<Record<string, (r: InRequest) => unknown>> = {
  presencePenalty: (r) => r.presencePenalty,
  frequencyPenalty: (r) => r.frequencyPenalty,
  seed: (r) => r.seed
}

function droppedColumn (upstream: Upstream): Array<[string, (r: InRequest) => unknown]> {
  const out: Array<[string, (r: InRequest) => unknown]> = []
  for (const [name, row] of Object.entries(GEMINI_GENERATION_FIELDS) as Array<[string, Row]>) {
    if (row[upstream] !== 'dropped' || !read(row)) continue
    const setting = SETTINGS[name]
    if (setting === undefined) throw new Error(`generationConfig.${name}: dropped toward ${upstream} but read with no setting to report it by`)
    out.push([name, setting])
  }
  return out
}

const DROPPED: Readonly<Record<Upstream, Array<[string, (r: InRequest) => unknown]>>> = { openai: droppedColumn('openai'), messages: droppedColumn('messages') }

/** Reports the generationConfig fields the request sets that `upstream`'s column of the table drops (a value asking for nothing beyond the default aside). */
export function dropToward (r: InRequest, upstream: Upstream): void {
  for (const [name, setting] of DROPPED[upstream]) {
    const v = setting(r)
    if (v === undefined) continue
    const neutral = NEUTRAL.get(name)
    if (neutral === undefined || neutral !== JSON.stringify(v)) r.dropped.add(`generationConfig.${name}`)
  }
}

/** The tools a request may call: its allowedFunctionNames, when it names some. */
export function allowedTools (r: InRequest): ToolSpec[] {
  if (r.allowed === undefined || r.allowed.length === 0) return r.tools
  const allowed = new Set(r.allowed)
  return r.tools.filter((t) => allowed.has(t.name))
}

/** A thinking budget or level → an OpenAI reasoning effort (a budget of 0 is `none`, -1 is the model's own choice: `medium`). */
export function effortOf (thinking: NonNullable<InRequest['thinking']>): string {
  if (thinking.level !== undefined) return thinking.level
  const budget = thinking.budget ?? -1
  if (budget === 0) return 'none'
  if (budget === -1) return 'medium'
  if (budget <= 1024) return 'low'
  if (budget <= 8192) return 'medium'
  return 'high'
}
