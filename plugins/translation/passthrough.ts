import { errorBody } from '../errors.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage } from './types.js'
import { usageFromMessages, usageFromOpenAI } from './usage.js'

// Same protocol on both sides: the body goes up with the upstream's model name (and, for
// OpenAI streams, include_usage forced on), and comes back byte for byte; the pair only reads
// the usage, and drops the usage-only chunk the client did not ask for.

function parse (data: string): Json | null {
  try {
    const v = JSON.parse(data) as unknown
    return v !== null && typeof v === 'object' ? v as Json : null
  } catch {
    return null
  }
}

/** The message of an upstream error body, whatever its shape. */
export function upstreamMessage (status: number, body: unknown): string {
  const e = (body as { error?: unknown } | null)?.error
  if (e !== null && typeof e === 'object' && typeof (e as Json).message === 'string') return (e as Json).message as string
  if (typeof e === 'string') return e
  return `The upstream provider answered ${status}.`
}

export const openaiPassthrough: TranslatorPair = {
  client: 'openai',
  upstream: 'openai',
  path: '/chat/completions',
  request (body: Json, ctx: TranslateCtx) {
    const out: Json = { ...body, model: ctx.upstreamModel }
    if (body.stream === true) out.stream_options = { ...(body.stream_options as Json | undefined), include_usage: true }
    return { body: out, dropped: [] }
  },
  response (body: Json) {
    return { body: null, usage: usageFromOpenAI(body.usage) }
  },
  error (status: number, body: unknown): Json {
    const e = (body as { error?: unknown } | null)?.error
    if (e !== null && typeof e === 'object') return body as Json
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
        const choices = chunk.choices as Json[] | undefined
        if (Array.isArray(choices)) {
          if (choices.length === 0 && usage !== null && !ctx.includeUsage) return []
          for (const c of choices) {
            if (c.finish_reason !== null && c.finish_reason !== undefined) finished = true
            const delta = c.delta as Json | undefined
            if (typeof delta?.content === 'string') text.push(delta.content)
            if (Array.isArray(delta?.tool_calls)) {
              for (const tc of delta.tool_calls as Json[]) {
                const args = (tc.function as Json | undefined)?.arguments
                if (typeof args === 'string') text.push(args)
              }
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
    if ((body as Json | null)?.type === 'error') return body as Json
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
          case 'message_start':
            raw = { ...((data.message as Json | undefined)?.usage as Json | undefined) }
            seen = true
            break
          case 'message_delta':
            // counts in message_delta are cumulative: they replace what message_start said
            raw = { ...raw, ...(data.usage as Json | undefined) }
            seen = true
            break
          case 'content_block_delta': {
            const d = data.delta as Json | undefined
            if (typeof d?.text === 'string') text.push(d.text)
            else if (typeof d?.partial_json === 'string') text.push(d.partial_json)
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
