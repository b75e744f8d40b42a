import { Type, type Static } from '@sinclair/typebox'
import { ContentBlocked, definePlugin, errorEvent, hasTokenInput, mapRequestText, mapResponseText, streamText, type ClientEvent, type StreamContext } from './api/index.js'
// the guardrails' own helper, not part of the plugin API
import { regexShape } from './guardrails/regex-span.js'

// Gateway hooks: onAdmission (the request's text), onResponseBody and onStreamEvent (the
// answer's text). Content rules: a regular expression, an action and where it applies.
//   block   the request is refused with 400 `content_blocked` and nothing goes upstream; an
//           answer that matches is replaced by that error (a stream ends with it)
//   redact  each match becomes the replacement text ([REDACTED]) in what goes upstream
//           (on: request) or what the client gets (on: response)
// Only conversational text is looked at: what users and the model wrote, not tool schemas or
// tool-call arguments; an embedding's inputs and an image's prompt too (an embedding's input
// given as token ids is refused while request rules are set: no rule could read it).
//
// In a streamed answer a match may be split across deltas. Each text block keeps back, unsent,
// the end of its text that could be the start of a match still growing: at most as much as a
// match can span (for a pattern with a bounded length, say `\d{16}`, that length less one; for
// one with no bound, `+`, `*` or `{n,}`, max_hold_chars), and only from a character a match can
// start with (for `sk-[A-Za-z0-9_-]{20,}`, from an `s`). A match that reaches the end of what
// arrived so far is held whole until it stops growing. The rest is sent as soon as it arrives,
// and a block's held text when the block ends. So a match is caught wherever the deltas split it,
// unless a pattern with no bound spans more than max_hold_chars characters before it matches.

const Rule = Type.Object({
  name: Type.String({ minLength: 1 }),
  pattern: Type.String({ minLength: 1, description: 'a JavaScript regular expression' }),
  flags: Type.String({ default: '', pattern: '^[imsuv]*$', description: 'regular expression flags (g is implied)' }),
  action: Type.Union([Type.Literal('block'), Type.Literal('redact')], { default: 'redact' }),
  on: Type.Array(Type.Union([Type.Literal('request'), Type.Literal('response')]), { minItems: 1, default: ['request', 'response'] })
}, { additionalProperties: false })

const options = Type.Object({
  rules: Type.Array(Rule, { default: [] }),
  replacement: Type.String({ default: '[REDACTED]' }),
  max_hold_chars: Type.Integer({ default: 1024, minimum: 1, description: 'how much streamed text a pattern with no length bound may hold back' })
}, { additionalProperties: false })

type Options = Static<typeof options>

interface CompiledRule { name: string, re: RegExp, block: boolean, span: number, starts: RegExp | null }

interface Match { start: number, end: number, rule: CompiledRule }

/** Every match of the rules in `text`, left to right, without overlaps. */
function matches (rules: CompiledRule[], text: string): Match[] {
  const all: Match[] = []
  for (const rule of rules) {
    rule.re.lastIndex = 0
    for (let m = rule.re.exec(text); m !== null; m = rule.re.exec(text)) {
      if (m[0] === '') { rule.re.lastIndex++; continue }
      all.push({ start: m.index, end: m.index + m[0].length, rule })
    }
  }
  all.sort((a, b) => a.start - b.start || b.end - a.end)
  const out: Match[] = []
  let at = 0
  for (const m of all) if (m.start >= at) { out.push(m); at = m.end }
  return out
}

function redact (text: string, found: Match[], upTo: number, replacement: string): string {
  let out = ''
  let at = 0
  for (const m of found) {
    if (m.end > upTo) break
    out += text.slice(at, m.start) + replacement
    at = m.end
  }
  return out + text.slice(at, upTo)
}

interface StreamState { buffers: Map<string, string>, last: Map<string, ClientEvent>, blocked: boolean }

declare module 'fastify' {
  interface FastifyRequest {
    /** Text held back per block of a streamed answer (guardrails plugin). */
    guardrailsStream: StreamState | null
  }
}

export default definePlugin({
  name: 'guardrails',
  description: 'regular-expression rules that block or redact text in requests and answers',
  options,
  validate: (opts: Options) => {
    const problems: string[] = []
    opts.rules.forEach((r, i) => {
      try { regexShape(r.pattern, r.flags); RegExp(r.pattern, r.flags) } catch (err) { problems.push(`rules[${i}].pattern: not a valid regular expression: ${(err as Error).message}`) }
    })
    return problems
  },
  plugin: async (fastify, opts) => {
    const compile = (on: 'request' | 'response'): CompiledRule[] => opts.rules.filter((r) => r.on.includes(on)).map((r) => {
      const shape = regexShape(r.pattern, r.flags)
      return { name: r.name, re: new RegExp(r.pattern, r.flags.replace(/g/g, '') + 'g'), block: r.action === 'block', span: Math.min(shape.max, opts.max_hold_chars), starts: shape.starts }
    })
    const onRequest = compile('request')
    const onResponse = compile('response')

    /** Where the earliest match that could still grow past the end of `text` may start. */
    const holdFrom = (text: string): number => {
      let at = text.length
      for (const r of onResponse) {
        for (let i = Math.max(0, text.length - (r.span - 1)); i < at; i++) {
          if (r.starts === null) { at = i; break }
          r.starts.lastIndex = i
          if (r.starts.test(text)) { at = i; break }
        }
      }
      return at
    }

    /** Checks a whole text: throws on a block rule's match, returns it with the redactions. */
    const whole = (rules: CompiledRule[], text: string): string => {
      const found = matches(rules, text)
      if (found.length === 0) return text
      const blocked = found.find((m) => m.rule.block)
      if (blocked !== undefined) throw new ContentBlocked({ rule: blocked.rule.name })
      return redact(text, found, text.length, opts.replacement)
    }

    if (onRequest.length > 0) {
      fastify.gateway.addHook('onAdmission', (ctx) => {
        const { call, body } = ctx
        // token ids would carry text past every rule unread
        if (call.endpoint === 'embeddings' && hasTokenInput(body)) {
          throw fastify.gateway.refusal({ status: 400, code: 'content_unreadable', type: 'invalid_request_error', message: 'Content rules apply to this call: send the input as text, not as token ids.', retry: false })
        }
        mapRequestText(call.protocol, body, (text) => whole(onRequest, text), call.endpoint)
      })
    }
    if (onResponse.length === 0) return

    fastify.gateway.addHook('onResponseBody', (ctx) => {
      mapResponseText(ctx.call.protocol, ctx.body, (text) => whole(onResponse, text))
    })

    fastify.decorateRequest('guardrailsStream', null)

    /**
     * What of a block's buffered text can be sent now: everything when the block ended (`final`),
     * else all but what a match could still be growing into. null: a block rule matched.
     */
    const release = (buffer: string, final: boolean): { send: string, keep: string } | null => {
      const found = matches(onResponse, buffer)
      if (found.some((m) => m.rule.block)) return null
      let cut = final ? buffer.length : holdFrom(buffer)
      if (!final) {
        for (const m of found) if (m.end === buffer.length && m.start < cut) cut = m.start
        for (const m of found) if (m.start < cut && m.end > cut) cut = m.end
      }
      return { send: redact(buffer, found, cut, opts.replacement), keep: buffer.slice(cut) }
    }

    const blockedEvent = (ctx: StreamContext, rule: string): ClientEvent => {
      const err = new ContentBlocked({ rule })
      const frame = errorEvent(ctx.protocol, { status: 400, message: err.message, code: 'content_blocked', openaiType: 'invalid_request_error', messagesType: 'invalid_request_error' })
      return frame.event === undefined ? { data: JSON.parse(frame.data) } : { event: frame.event, data: JSON.parse(frame.data) }
    }

    fastify.gateway.addHook('onStreamEvent', (ctx, ev) => {
      const request = ctx.request
      let state = request.guardrailsStream
      if (state === null) {
        state = { buffers: new Map(), last: new Map(), blocked: false }
        request.guardrailsStream = state
      }
      if (state.blocked) return null
      const st = streamText(ctx.protocol)
      const deltas = st.deltas(ev)
      const closes = st.closes(ev)
      if (deltas.length === 0 && (closes === 'all' ? state.buffers.size === 0 : closes.every((b) => !state.buffers.has(b)))) {
        try {
          st.mapWholeTexts(ev, (text) => whole(onResponse, text))
        } catch {
          state.blocked = true
          return blockedEvent(ctx, rulesName(onResponse))
        }
        return undefined
      }
      const closing = new Set(closes === 'all' ? [...state.buffers.keys(), ...deltas.map((d) => d.block)] : closes)
      const sent = new Map<string, string>()
      for (const d of deltas) {
        const r = release((state.buffers.get(d.block) ?? '') + d.text, closing.has(d.block))
        if (r === null) { state.blocked = true; return blockedEvent(ctx, blockingRule(onResponse, (state.buffers.get(d.block) ?? '') + d.text)) }
        state.buffers.set(d.block, r.keep)
        state.last.set(d.block, ev)
        sent.set(d.block, r.send)
      }
      const out: ClientEvent[] = []
      // blocks this event ends without a delta of their own: their held text goes just before it
      for (const block of closing) {
        if (sent.has(block)) continue
        const rest = state.buffers.get(block)
        state.buffers.delete(block)
        if (rest === undefined || rest === '') continue
        const r = release(rest, true)
        if (r === null) { state.blocked = true; return blockedEvent(ctx, blockingRule(onResponse, rest)) }
        out.push(st.textEvent(state.last.get(block) ?? ev, block, r.send))
      }
      for (const block of closing) state.buffers.delete(block)
      // a text-only event whose text is all held back is not sent
      const empty = deltas.length > 0 && closing.size === 0 && [...sent.values()].every((t) => t === '') && isTextOnly(ctx, ev)
      if (empty) return out
      const main = deltas.length > 0 ? st.withDeltas(ev, sent) : ev
      try {
        st.mapWholeTexts(main, (text) => whole(onResponse, text))
      } catch {
        state.blocked = true
        return blockedEvent(ctx, rulesName(onResponse))
      }
      out.push(main)
      return out
    })
  }
})

const rulesName = (rules: CompiledRule[]): string => rules.find((r) => r.block)?.name ?? rules[0]?.name ?? ''

function blockingRule (rules: CompiledRule[], text: string): string {
  return matches(rules, text).find((m) => m.rule.block)?.rule.name ?? rulesName(rules)
}

/** An event that carries nothing but a text delta (an empty one can be left out). */
function isTextOnly (ctx: StreamContext, ev: ClientEvent): boolean {
  const d = ev.data
  if (ctx.protocol === 'messages') return d.type === 'content_block_delta'
  if (ctx.protocol === 'responses') return d.type === 'response.output_text.delta'
  if (ctx.protocol === 'gemini') return isGeminiTextOnly(d)
  const choices = Array.isArray(d.choices) ? d.choices as Array<Record<string, unknown>> : []
  return choices.every((c) => {
    const delta = c.delta as Record<string, unknown> | undefined
    return (c.finish_reason === null || c.finish_reason === undefined) && delta !== undefined && Object.keys(delta).every((k) => k === 'content')
  }) && (d.usage === null || d.usage === undefined)
}

/**
 * A Gemini chunk of answer text alone: no function call, thought, media or signature in its
 * parts, no finishReason, nothing of the prompt's. Its usageMetadata is a running count that the
 * next chunk repeats, so it may go with it.
 */
function isGeminiTextOnly (d: Record<string, unknown>): boolean {
  if (d.promptFeedback !== undefined || d.error !== undefined) return false
  const candidates = Array.isArray(d.candidates) ? d.candidates as unknown[] : []
  return candidates.every((c) => {
    if (c === null || typeof c !== 'object') return false
    const cand = c as Record<string, unknown>
    if (cand.finishReason !== undefined && cand.finishReason !== null) return false
    const content = cand.content as Record<string, unknown> | undefined
    const parts = Array.isArray(content?.parts) ? content.parts as unknown[] : []
    return parts.every((p) => p !== null && typeof p === 'object' && Object.keys(p).every((k) => k === 'text'))
  })
}
