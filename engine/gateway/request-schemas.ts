import { Type, type TSchema } from '@sinclair/typebox'

// The shapes of the call bodies, as TypeBox schemas: what a body must be to go anywhere. They
// name only the fields the gateway reads itself (the model, the messages or contents, the stream
// flag, the output cap); every other field is the model's business (kept, dropped as unsupported,
// or mapped by a translator pair), so the objects stay open. The call routes validate with them
// through Fastify (a strict validator: a body's values are never coerced), Google's method calls
// (whose countTokens body may wrap its request) through `checkBody`; a problem reads as every
// other does (engine/kernel/schema-check.ts): `messages[2].role: is required`.

const Model = Type.String({ minLength: 1 })
const Role = Type.Object({ role: Type.String() }, { description: 'an object with a role' })
const Messages = Type.Array(Role, { minItems: 1 })
const PositiveInteger = Type.Integer({ minimum: 1 })
const OrNull = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()])

/** POST /v1/chat/completions. */
export const ChatBody = Type.Object({
  model: Model,
  messages: Messages,
  stream: Type.Optional(Type.Boolean()),
  max_tokens: Type.Optional(OrNull(PositiveInteger))
})

/** POST /v1/messages: `max_tokens` is required in Anthropic's API. */
export const MessagesBody = Type.Object({
  model: Model,
  messages: Messages,
  stream: Type.Optional(Type.Boolean()),
  max_tokens: PositiveInteger
})

/** POST /v1/messages/count_tokens. */
export const CountTokensBody = Type.Object({
  model: Model,
  messages: Messages
})

const InputItem = Type.Unsafe<Record<string, unknown>>({
  type: 'object',
  anyOf: [{ required: ['type'], properties: { type: { type: 'string' } } }, { required: ['role'], properties: { role: { type: 'string' } } }],
  description: 'an object with a type or a role'
})

/** POST /v1/responses. */
export const ResponsesBody = Type.Object({
  model: Model,
  input: Type.Union([Type.String(), Type.Array(InputItem, { minItems: 1 })], { description: 'a string or an array of items' }),
  stream: Type.Optional(OrNull(Type.Boolean())),
  max_output_tokens: Type.Optional(OrNull(PositiveInteger)),
  tools: Type.Optional(OrNull(Type.Array(Type.Unknown())))
})

const Parts = Type.Array(Type.Object({}, { description: 'an object' }))

/** Google's generateContent and countTokens (its model and stream mode are the URL's). */
export const GeminiBody = Type.Object({
  contents: Type.Array(Type.Object({ role: Type.Optional(Type.String()), parts: Parts }, { description: 'an object with parts' }), { minItems: 1 }),
  systemInstruction: Type.Optional(Type.Union([Type.String(), Type.Object({ parts: Parts })], { description: 'a string or an object with parts' })),
  generationConfig: Type.Optional(Type.Object({})),
  toolConfig: Type.Optional(Type.Object({})),
  tools: Type.Optional(Type.Array(Type.Unknown())),
  safetySettings: Type.Optional(Type.Array(Type.Unknown()))
})
