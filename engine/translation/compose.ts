import type { ViaMessagesCodec } from '../protocols/converse/index.js'
import { errorEvent } from '../protocols/index.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, UpstreamProtocol } from './types.js'

// A client protocol in front of an upstream protocol reached through Messages: the client's pair
// to Messages, then the upstream's codec, both ways. Requests go client → Messages → upstream;
// answers, errors and stream frames come back upstream → Messages → client. The usage is read
// from the upstream's own counts (Converse splits its cache writes by TTL, which the Messages
// pair would read back the same but only after a round trip through Messages' shape).

export function compose<Req extends Json, Res> (toMessages: TranslatorPair, codec: ViaMessagesCodec<Req, Res>, upstream: UpstreamProtocol): TranslatorPair {
  return {
    client: toMessages.client,
    upstream,
    path: codec.path,
    request (body: Json, ctx: TranslateCtx) {
      const first = toMessages.request(body, ctx)
      const second = codec.request(first.body, ctx)
      if (second.dropped.length === 0) return { body: second.body, dropped: first.dropped }
      return { body: second.body, dropped: [...new Set([...first.dropped, ...second.dropped])].sort() }
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
