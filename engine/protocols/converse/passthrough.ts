import { isObj } from '../../kernel/json.js'
import { messagesPassthrough } from '../../translation/passthrough.js'
import type { TranslateCtx, TranslatorPair, Usage } from '../../translation/types.js'
import { usageFromMessages } from '../messages/usage.js'
import { readTokenUsage, usageOf } from './answer.js'
import { ConverseToMessages, converseFrame, EventStreamParser, invokeFrame } from './stream.js'

// Bedrock's own API behind /passthrough/{id}/: the client's body goes up as it is (the model is
// in the path), the answer comes back byte for byte, and the gateway reads only the usage: of a
// Converse answer, of an InvokeModel (Messages) answer, or of their event streams as the bytes
// go by.

// a body passed along unread: the pair's own (untyped) body type
const asIs: TranslatorPair['request'] = (body) => ({ body, dropped: [] })
const noStream = (): never => { throw new Error('a Bedrock stream is metered as its bytes go by (bedrockStreamMeter)') }

/** Reads the usage of a Converse answer (`/model/{id}/converse`). */
export const converseReader: TranslatorPair = {
  client: 'messages',
  upstream: 'converse',
  path: '',
  request: asIs,
  response: (body) => {
    let usage: Usage | null = null
    try { usage = usageOf(readTokenUsage(body.usage)) } catch { usage = null } // an answer without usage is estimated, as a stream cut short is
    return { body: null, usage }
  },
  error: (_status, body) => (isObj(body) ? body : {}),
  stream: noStream
}

/** Reads the usage of an InvokeModel answer of an Anthropic model (`/model/{id}/invoke`): the Messages answer. */
export const invokeReader: TranslatorPair = {
  client: 'messages',
  upstream: 'messages',
  path: '',
  request: asIs,
  response: (body) => ({ body: null, usage: usageFromMessages(body.usage) }),
  error: (_status, body) => (isObj(body) ? body : {}),
  stream: noStream
}

/**
 * The usage of a Bedrock event stream read as its bytes go to the client unchanged: Converse's
 * metadata event, or the Messages events InvokeModel's chunks carry. A stream the meter cannot
 * read (a broken frame) stops being read and ends unfinished: the call is then estimated.
 */
export function bedrockStreamMeter (kind: 'converse' | 'invoke', ctx: TranslateCtx): { push: (chunk: Buffer) => void, usage: () => Usage | null, finished: () => boolean } {
  const parser = new EventStreamParser(kind === 'converse' ? converseFrame : invokeFrame)
  const converse = kind === 'converse' ? new ConverseToMessages(ctx) : null
  const messages = kind === 'invoke' ? messagesPassthrough.stream(ctx) : null
  let broken = false
  return {
    push (chunk) {
      if (broken) return
      try {
        for (const f of parser.push(chunk)) {
          if (converse !== null) converse.push(f)
          else messages?.push(f)
        }
      } catch {
        broken = true
      }
    },
    usage: () => converse !== null ? converse.usage() : messages?.usage() ?? null,
    finished: () => !broken && (converse !== null ? converse.finished() : messages?.finished() ?? false)
  }
}
