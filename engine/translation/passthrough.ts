import { errorBody, messagesTypeFor, openaiTypeFor } from '../kernel/errors.js'
import { isObj } from '../protocols/fields.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage } from './types.js'
import { usageFromMessages, usageFromOpenAI } from './usage.js'

// Same protocol on both sides: the body goes up with the upstream's model name (and, for
// OpenAI streams, include_usage forced on), and comes back byte for byte; the pair only reads
// the usage, and drops the usage-only chunk the client did not ask for.

function parse (data: string): Json | null {
  try {
    const v = JSON.parse(data) as unknown
    return isObj(v) ? v : null
  } catch {
    return null
  }
}

/** The message of an upstream error body, whatever its shape. */
export function upstreamMessage (status: number, body: unknown): string {
  const e = isObj(body) ? body.error : undefined
  if (isObj(e) && typeof e.message === 'string') return e.message
  if (typeof e === 'string') return e
  return `The upstream provider answered ${status}.`
}

export const openaiPassthrough: TranslatorPair = {
  client: 'openai',
  upstream: 'openai',
  path: '/chat/completions',
  request (body: Json, ctx: TranslateCtx) {
    const out: Json = { ...body, model: ctx.upstreamModel }
    if (body.stream === true) out.stream_options = { ...(isObj(body.stream_options) ? body.stream_options : {}), include_usage: true }
    return { body: out, dropped: [] }
  },
  response (body: Json) {
    return { body: null, usage: usageFromOpenAI(body.usage) }
  },
  error (status: number, body: unknown): Json {
    // the upstream's body goes back as it is, with what the numeric-code shape promises filled
    // in: many OpenAI-compatible servers answer `code: null`, or no code at all
    if (isObj(body) && isObj(body.error)) {
      const e = body.error
      return {
        ...body,
        error: {
          ...e,
          code: e.code ?? status,
          message: typeof e.message === 'string' ? e.message : upstreamMessage(status, body),
          type: typeof e.type === 'string' ? e.type : openaiTypeFor(status)
        }
      }
    }
    return errorBody('openai', { status, message: upstreamMessage(status, body) })
  },
  stream (ctx: TranslateCtx): StreamMapper {
    let usage: Usage | null = null
    let finished = false
    const text: string[] = []
    return {
      push (ev: SseEvent): SseEvent[] {
        if (ev.data === '[DONE]') { finished = true; return [ev] }
        const chunk = parse(ev.data)
        if (chunk === null) return [ev]
        if (chunk.usage !== undefined && chunk.usage !== null) usage = usageFromOpenAI(chunk.usage)
        const choices = chunk.choices
        if (Array.isArray(choices)) {
          if (choices.length === 0 && usage !== null && !ctx.includeUsage) return []
          for (const c of choices.filter(isObj)) {
            if (c.finish_reason !== null && c.finish_reason !== undefined) finished = true
            const delta = isObj(c.delta) ? c.delta : {}
            if (typeof delta.content === 'string') text.push(delta.content)
            for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isObj) : []) {
              const args = isObj(tc.function) ? tc.function.arguments : undefined
              if (typeof args === 'string') text.push(args)
            }
          }
        }
        return [ev]
      },
      end: () => [],
      usage: () => usage,
      relayedText: () => text.join(''),
      finished: () => finished
    }
  }
}

export const messagesPassthrough: TranslatorPair = {
  client: 'messages',
  upstream: 'messages',
  path: '/v1/messages',
  request (body: Json, ctx: TranslateCtx) {
    return { body: { ...body, model: ctx.upstreamModel }, dropped: [] }
  },
  response (body: Json) {
    return { body: null, usage: usageFromMessages(body.usage) }
  },
  error (status: number, body: unknown): Json {
    if (isObj(body) && body.type === 'error' && isObj(body.error)) {
      const e = body.error
      if (typeof e.type === 'string' && typeof e.message === 'string') return body
      return { ...body, error: { ...e, type: typeof e.type === 'string' ? e.type : messagesTypeFor(status), message: upstreamMessage(status, body) } }
    }
    return errorBody('messages', { status, message: upstreamMessage(status, body) })
  },
  stream (): StreamMapper {
    let raw: Json = {}
    let seen = false
    let finished = false
    const text: string[] = []
    return {
      push (ev: SseEvent): SseEvent[] {
        const data = parse(ev.data)
        if (data === null) return [ev]
        switch (data.type) {
          case 'message_start': {
            const usage = isObj(data.message) ? data.message.usage : undefined
            raw = isObj(usage) ? { ...usage } : {}
            seen = true
            break
          }
          case 'message_delta':
            // counts in message_delta are cumulative: they replace what message_start said
            if (isObj(data.usage)) raw = { ...raw, ...data.usage }
            seen = true
            break
          case 'content_block_delta': {
            const d = isObj(data.delta) ? data.delta : {}
            if (typeof d.text === 'string') text.push(d.text)
            else if (typeof d.partial_json === 'string') text.push(d.partial_json)
            break
          }
          case 'message_stop':
            finished = true
            break
        }
        return [ev]
      },
      end: () => [],
      usage: () => seen ? usageFromMessages(raw) : null,
      relayedText: () => text.join(''),
      finished: () => finished
    }
  }
}

/** Messages' count_tokens, to a Messages upstream: the body goes up with the upstream's model name, the count comes back as it is; a count bills nothing. */
export const countTokensPair: TranslatorPair = {
  client: 'messages',
  upstream: 'messages',
  path: '/v1/messages/count_tokens',
  request: (body, ctx) => ({ body: { ...body, model: ctx.upstreamModel }, dropped: [] }),
  response: () => ({ body: null, usage: null }),
  error: messagesPassthrough.error,
  stream: () => { throw new Error('count_tokens is never streamed') }
}
