import type { CatalogModel, Price } from './catalog.js'
import { estimatePromptTokens, worstCaseCharge } from './billing.js'
import type { Json } from '../translation/types.js'

// What a call can cost at most, read from its body the way the translators read it, for the
// holds taken at admission (the balance plugin). The hold covers the body as it reaches the
// upstream, whichever protocol that upstream speaks:
//
//   output       the largest output limit the body names in its protocol's fields (`max_tokens`,
//                `max_completion_tokens`, `max_output_tokens`, `generationConfig.maxOutputTokens`):
//                a translator sends one of them, an OpenAI-compatible server may honour either; with
//                none, the model's output cap (never less than what a translator fills in, a
//                thinking budget it adds on top of the answer included); and never less than a
//                field of another protocol, which a translator may pass on
//   candidates   times every answer the upstream may generate (`n`, `candidateCount`)
//   prompt       every prompt-bearing block counted conservatively (estimatePromptTokens): a
//                block the gateway cannot size (a PDF, audio, a file by reference) counts as the
//                model's whole context window, which no upstream bills a prompt beyond
//   server tools each tool the provider runs itself, at its per-use price times its use cap
//                (`max_uses`, `max_tool_calls`, else DEFAULT_SERVER_TOOL_USES)

/** The uses a server tool is held for when the request sets no cap of its own. */
export const DEFAULT_SERVER_TOOL_USES = 20

/** A positive integer, else undefined (what a translator would send, or refuse). */
const count = (v: unknown): number | undefined => typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined

const obj = (v: unknown): Json | undefined => v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Json : undefined

/**
 * The largest output limit a body names in the fields of its protocol (those its translators
 * read, and its upstream honours); undefined when it names none. An OpenAI-protocol body may go
 * to any of OpenAI's endpoints (pass-through): each of their names counts.
 */
export function outputLimit (body: Json, protocol: string): number | undefined {
  // read field by field, with no list made: every admitted call with a price passes here
  if (protocol === 'openai') return larger(larger(count(body.max_tokens), count(body.max_completion_tokens)), count(body.max_output_tokens))
  if (protocol === 'messages') return count(body.max_tokens)
  if (protocol === 'responses') return count(body.max_output_tokens)
  if (protocol === 'gemini') return count(obj(body.generationConfig)?.maxOutputTokens)
  return undefined
}

/** The larger of two limits, either of which may be absent. */
const larger = (a: number | undefined, b: number | undefined): number | undefined => a === undefined ? b : b === undefined || a >= b ? a : b

/** The largest output limit a body names in any protocol's field: a translator may pass another protocol's field on (a model that lists it). */
function anyLimit (body: Json): number {
  return Math.max(outputLimit(body, 'openai') ?? 0, outputLimit(body, 'gemini') ?? 0)
}

/** How many answers the upstream may generate for a body: `n` (or a legacy completion's `best_of`), `candidateCount`; at least one. */
export function candidates (body: Json): number {
  return Math.max(1, count(body.n) ?? 1, count(body.best_of) ?? 1, count(obj(body.generationConfig)?.candidateCount) ?? 1)
}

/** A thinking budget a translator may add on top of the answer's own limit (Gemini's thinkingConfig). */
function thinkingBudget (body: Json): number {
  const t = obj(obj(body.generationConfig)?.thinkingConfig)
  const budget = count(t?.thinkingBudget)
  // a level or a dynamic budget: the largest a translator maps one to
  if (budget === undefined) return t === undefined ? 0 : 32_768
  return budget
}

// Tools the client runs itself, by their kind: no per-use fee.
const CLIENT_TOOLS = new Set(['function', 'custom', 'namespace', 'bash', 'text_editor', 'computer', 'computer_use_preview', 'memory', 'local_shell', 'shell', 'apply_patch'])

// Gemini's tool objects the provider runs, by their field, and the kind they are priced under.
const GEMINI_TOOLS = new Map<string, string>([
  ['googleSearch', 'web_search'], ['google_search', 'web_search'],
  ['googleSearchRetrieval', 'web_search'], ['google_search_retrieval', 'web_search'],
  ['enterpriseWebSearch', 'web_search'], ['enterprise_web_search', 'web_search'],
  ['codeExecution', 'code_execution'], ['code_execution', 'code_execution'],
  ['urlContext', 'url_context'], ['url_context', 'url_context'],
  ['googleMaps', 'maps'], ['google_maps', 'maps'],
  ['fileSearch', 'file_search'], ['file_search', 'file_search'],
  ['retrieval', 'retrieval']
])
// Gemini's tool objects the client runs
const GEMINI_CLIENT = new Set(['functionDeclarations', 'function_declarations', 'computerUse', 'computer_use'])

/** A tool type as its price names it: dates dropped (`web_search_20250305`, `web_search_preview_2025_03_11` → `web_search`). */
export function serverToolKind (type: string): string {
  return type.replace(/_\d{8}$/, '').replace(/_\d{4}_\d{2}_\d{2}$/, '').replace(/_preview$/, '').toLowerCase()
}

/**
 * The tools a body asks the provider to run itself, by kind, each with the most uses it may
 * make: Messages server tools (`web_search_20250305`, `web_fetch_…`, `code_execution_…`, with
 * their `max_uses`), Responses built-in tools (`web_search`, `file_search`, `code_interpreter`,
 * `image_generation`, `mcp`, capped by `max_tool_calls`), Gemini's grounding and execution tools
 * (`googleSearch`, `codeExecution`, `urlContext`…) and Chat Completions' `web_search_options`.
 */
export function serverTools (body: Json): Map<string, number> {
  const found = new Map<string, number>()
  const cap = count(body.max_tool_calls)
  const add = (kind: string, uses: number | undefined): void => {
    const n = uses ?? cap ?? DEFAULT_SERVER_TOOL_USES
    found.set(kind, (found.get(kind) ?? 0) + n)
  }
  if (body.web_search_options !== undefined && body.web_search_options !== null) add('web_search', undefined)
  const tools = body.tools
  if (!Array.isArray(tools)) return found
  for (const t of tools) {
    const tool = obj(t)
    if (tool === undefined) continue
    if (typeof tool.type === 'string') {
      const kind = serverToolKind(tool.type)
      if (CLIENT_TOOLS.has(kind) || tool.input_schema !== undefined) continue
      add(kind, count(tool.max_uses))
      continue
    }
    // a Messages custom tool (no type), or a Gemini tool object
    for (const key of Object.keys(tool)) {
      if (GEMINI_CLIENT.has(key)) continue
      const kind = GEMINI_TOOLS.get(key)
      if (kind !== undefined) add(kind, undefined)
    }
  }
  return found
}

/** The server tools among `tools` that `price` names no per-use price for. */
export function unpricedServerTools (tools: ReadonlyMap<string, number>, price: Price | null): string[] {
  const out: string[] = []
  for (const kind of tools.keys()) if (price?.server_tools?.get(kind) === undefined) out.push(kind)
  return out
}

/** What the server tools of a body can cost at most, at `price`'s per-use prices. */
export function serverToolsCharge (tools: ReadonlyMap<string, number>, price: Price): number {
  let nano = 0
  for (const [kind, uses] of tools) nano += uses * (price.server_tools?.get(kind) ?? 0)
  return nano
}

/**
 * What a call to `model` (priced) with this body in its client `protocol` can cost at most, in
 * nano-dollars; `defaultMaxTokens` is what a translator sends as the output limit of a call that
 * names none.
 */
export function holdOf (model: CatalogModel, endpoint: string, protocol: string, body: Json, defaultMaxTokens = 0): number {
  const price = model.price as Price
  const perAnswer = model.config.max_output_tokens ?? model.config.context_length
  if (endpoint === 'embeddings') return worstCaseCharge(price, estimatePromptTokens(body))
  const prompt = Math.min(estimatePromptTokens(body), model.config.context_length)
  if (endpoint === 'images.generations') {
    // an image model's output cap bounds each image's
    const images = count(body.n) ?? 1
    return worstCaseCharge(price, prompt + images * perAnswer, images)
  }
  const explicit = outputLimit(body, protocol)
  const thinking = protocol === 'gemini' ? thinkingBudget(body) : 0
  // with no limit of its own, a translator fills in its default, on top of a thinking budget
  // and a field of another protocol a translator passes on may be honoured too
  const output = Math.max(explicit ?? Math.max(perAnswer, defaultMaxTokens + thinking), anyLimit(body))
  const tokens = worstCaseCharge(price, prompt + candidates(body) * output)
  if (body.tools === undefined && body.web_search_options === undefined) return tokens
  return tokens + serverToolsCharge(serverTools(body), price)
}
