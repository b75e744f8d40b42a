import type { FieldTable } from '../protocols/fields.js'
import type { Json, Protocol, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatedResponse, TranslatorPair, Usage } from './types.js'

// An upstream protocol spoken through another protocol's shape. Its codec (a bridge) maps the
// request a pair writes for a `via` upstream (Messages, say) onto its own wire format, and its
// answers, errors and stream events back into the `via` protocol's; `compose` puts it behind
// every pair toward `via`, so that a protocol added this way is one codec, not one pair per
// client protocol. Whatever the `via` pair keeps (thinking and its signatures, cache control,
// tool call ids, citations) reaches the bridge, which keeps what its own format has room for.
//
// Dropped fields are reported by the client's names: the `via` pair reports what has no place
// in `via`; the client protocol's field table has a column for the bridged upstream, and a
// field the client sent that this column drops (and the `via` column does not) is reported
// too. The bridge itself leaves out what its format has no place for; the names it reports are
// `via`'s, reported only to a client of `via` itself (any other client's names are its table's).

/** The codec of an upstream protocol that speaks to the gateway through another protocol's shape. */
export interface Bridge {
  /** The upstream protocol it speaks. */
  upstream: Protocol
  /** The protocol whose upstream requests it takes and whose answers it gives back. */
  via: Protocol
  /** The upstream path below the provider's base_url (a function of the call where it names the model). */
  path: TranslatorPair['path']
  /** A request written for a `via` upstream → its own; `dropped` names `via` fields it has no place for. */
  request: (body: Json, ctx: TranslateCtx) => TranslatedRequest
  /** Its whole answer → the `via` protocol's, and its usage. */
  response: (body: Json, ctx: TranslateCtx) => { body: Json, usage: Usage | null }
  /** Its error status and body → a `via` error body. */
  error: (status: number, body: unknown) => Json
  /** Its stream events → `via` stream events (an SseEvent per `via` frame). */
  stream: (ctx: TranslateCtx) => StreamMapper
}

/** The names of the fields of `body` that `fields` drops toward `upstream` but not toward `via`. */
function droppedToward (body: Json, fields: FieldTable | undefined, upstream: Protocol, via: Protocol): string[] {
  if (fields === undefined) return []
  const out: string[] = []
  for (const key of Object.keys(body)) {
    const row = Object.hasOwn(fields, key) ? fields[key] : undefined
    if (row?.[upstream] === 'dropped' && row[via] !== 'dropped' && body[key] !== undefined && body[key] !== null) out.push(key)
  }
  return out
}

/**
 * The pair of a client protocol in front of a bridged upstream: `pair` (client → `bridge.via`)
 * then `bridge`. `fields` is the client protocol's field table (its column toward the bridged
 * upstream says which of the client's fields are dropped there).
 */
export function compose (pair: TranslatorPair, bridge: Bridge, fields?: FieldTable): TranslatorPair {
  if (pair.upstream !== bridge.via) throw new Error(`a ${pair.client} → ${pair.upstream} pair cannot go through a bridge from ${bridge.via}`)
  const own = pair.client === bridge.via
  return {
    client: pair.client,
    upstream: bridge.upstream,
    path: bridge.path,
    request (body: Json, ctx: TranslateCtx): TranslatedRequest {
      const first = pair.request(body, ctx)
      const second = bridge.request(first.body, ctx)
      const dropped = [...first.dropped]
      for (const name of own ? second.dropped : droppedToward(body, fields, bridge.upstream, bridge.via)) if (!dropped.includes(name)) dropped.push(name)
      return { body: second.body, dropped }
    },
    response (body: Json, ctx: TranslateCtx): TranslatedResponse {
      const via = bridge.response(body, ctx)
      const mapped = pair.response(via.body, ctx)
      // a same-protocol pair answers "unchanged": the client gets the `via` answer the bridge wrote
      return { body: mapped.body ?? via.body, usage: mapped.usage ?? via.usage }
    },
    error: (status: number, body: unknown): Json => pair.error(status, bridge.error(status, body)),
    stream (ctx: TranslateCtx): StreamMapper {
      const outer = bridge.stream(ctx)
      const inner = pair.stream(ctx)
      const through = (events: SseEvent[]): SseEvent[] => events.flatMap((ev) => inner.push(ev))
      const mapper: StreamMapper = {
        push: (ev) => through(outer.push(ev)),
        end: () => [...through(outer.end()), ...inner.end()],
        usage: () => inner.usage() ?? outer.usage(),
        relayedText: () => inner.relayedText(),
        // the client's stream is the inner pair's: it has ended when the pair wrote its end
        finished: () => inner.finished()
      }
      if (inner.fail !== undefined) mapper.fail = inner.fail
      return mapper
    }
  }
}
