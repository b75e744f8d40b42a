import type { ViaMessagesCodec } from '../protocols/converse/index.js'
import { errorEvent } from '../protocols/index.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, UpstreamProtocol } from './types.js'

// A client protocol in front of an upstream protocol reached through Messages: the client's pair
// to Messages, then the upstream's codec, both ways. Requests go client → Messages → upstream
// (what the upstream cannot carry reported by the client's names: messagesOrigins);
// answers, errors and stream frames come back upstream → Messages → client. The usage is read
// from the upstream's own counts (Converse splits its cache writes by TTL, which the Messages
// pair would read back the same but only after a round trip through Messages' shape).

/** Whether a value is at `path` (dots between fields; through a list, in any of its items). */
function presentAt (value: unknown, path: readonly string[]): boolean {
  if (Array.isArray(value)) return value.some((item) => presentAt(item, path))
  if (path.length === 0) return value !== undefined && value !== null
  if (typeof value !== 'object' || value === null) return false
  return presentAt((value as Record<string, unknown>)[path[0] as string], path.slice(1))
}

/**
 * A Messages field (or a part of one) the upstream's leg dropped, by the client's names: those of
 * the fields it is made from that the client sent (the first of them when none is found), or the
 * Messages name where the client's is the same.
 */
function clientNames (toMessages: TranslatorPair, name: string, body: Json): readonly string[] {
  const from = toMessages.messagesOrigins?.[name]
  if (from === undefined || from.length === 0) return [name]
  const sent = from.filter((path) => presentAt(body, path.split('.')))
  return sent.length > 0 ? sent : [from[0] as string]
}

export function compose<Req extends Json, Res> (toMessages: TranslatorPair, codec: ViaMessagesCodec<Req, Res>, upstream: UpstreamProtocol): TranslatorPair {
  return {
    client: toMessages.client,
    upstream,
    path: codec.path,
    request (body: Json, ctx: TranslateCtx) {
      const first = toMessages.request(body, ctx)
      const second = codec.request(first.body, ctx)
      if (second.dropped.length === 0) return { body: second.body, dropped: first.dropped }
      // what the upstream's leg cannot carry, named as the client sent it
      const theirs = second.dropped.flatMap((name) => clientNames(toMessages, name, body))
      return { body: second.body, dropped: [...new Set([...first.dropped, ...theirs])].sort() }
    },
    response (body: Json, ctx: TranslateCtx) {
      // the upstream's answer as its protocol types it; the codec's reader checks each field it reads
      const messages = codec.response(body as Res, ctx)
      // the pairs read and write bodies of no declared shape (Message is an interface, with no index signature)
      const answer = messages.body as object as Json
      const out = toMessages.response(answer, ctx)
      // a Messages client's pair relays its upstream's bytes unchanged: here they are the Messages answer
      return { body: out.body ?? answer, usage: messages.usage }
    },
    error: (status: number, body: unknown) => toMessages.error(status, codec.error(status, body)),
    stream (ctx: TranslateCtx): StreamMapper {
      const inner = codec.stream(ctx)
      const outer = toMessages.stream(ctx)
      const through = (frames: SseEvent[]): SseEvent[] => {
        if (frames.length === 0) return frames
        const out: SseEvent[] = []
        for (const f of frames) for (const g of outer.push(f)) out.push(g)
        return out
      }
      return {
        push: (ev) => through(inner.push(ev)),
        end: () => [...through(inner.end()), ...outer.end()],
        usage: () => inner.usage(),
        relayedText: () => outer.relayedText(),
        finished: () => inner.finished() && outer.finished(),
        // the upstream's own exception already reached the client as its protocol's error event
        fail: (e) => inner.excepted()
          ? []
          : outer.fail?.(e) ?? [errorEvent(toMessages.client, { status: e.status, message: e.message, code: e.code, openaiType: e.type })]
      }
    }
  }
}
