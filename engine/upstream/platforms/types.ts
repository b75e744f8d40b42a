import type { Readable } from 'node:stream'
import type { Json } from '../../kernel/json.js'

// A platform is where a provider's models are served and how it is reached: the vendor's own API
// (the default), or a cloud platform that serves the same models under its own URLs and
// authentication (Azure OpenAI, AWS Bedrock, Google Vertex AI). The translator pairs make the
// body of the provider's protocol and the path the vendor's API would take; the platform, one
// instance per provider, moves that call onto its own URL and body, adds its credentials to the
// request as it goes out (signing the final bytes where it must), reads a stream framed its own
// way, and renews its credentials when the upstream refuses them.

export type PlatformName = 'vendor' | 'azure' | 'bedrock' | 'vertex'

/** One model call as the vendor's API would take it, about to go to this platform. */
export interface PlatformCall {
  /** The path below base_url on the vendor's API (`/chat/completions`, `/v1/messages`, `/v1beta/models/x:generateContent`). */
  path: string
  /** The body in the provider's protocol; undefined for a call with none. */
  body: Json | undefined
  /** The provider's protocol (`openai`, `messages`, `gemini`, `converse`). */
  protocol: string
  /** The model's name on this provider (its provider entry's upstream_model). */
  model: string
  /** The client asked for a stream. */
  stream: boolean
}

/** The call as this platform takes it. */
export interface PlatformTarget {
  path: string
  body: Json | undefined
}

/** A request as it goes out, every byte of it final: what a signature covers. */
export interface OutgoingRequest {
  method: string
  /** The full path on the provider's origin (base_url's own path included), with its query string. */
  path: string
  /** The headers so far (lower-case names): the call's own, the provider's configured headers, the content type. */
  headers: Readonly<Record<string, string | string[]>>
  /** The body as sent; a stream (a pass-through upload) cannot be hashed before it is sent. */
  body: string | Readable | undefined
}

export interface Platform {
  readonly name: PlatformName
  /**
   * OpenTelemetry's gen_ai.provider.name for calls here (`azure.openai`, `gcp.vertex_ai`,
   * `aws.bedrock`); null on the vendor's API, where the protocol names the vendor.
   */
  readonly traceName: string | null
  /** The provider's origin and base path: base_url, or the platform's default for its region or location. */
  readonly baseUrl: string
  /** Whether the platform has the credentials it needs (present, not checked against the upstream). */
  readonly configured: boolean
  /** Why the credentials are not usable, when they were given but cannot be read (a service-account file); never holds a secret. */
  readonly problem?: string
  /**
   * A model call moved onto the platform: its path (the model in the URL where the platform puts
   * it there) and its body (a field dropped or added). Undefined: the platform serves no such call
   * (the provider is skipped for it).
   */
  target: (call: PlatformCall) => PlatformTarget | undefined
  /**
   * The credential headers of one outgoing request (model call or pass-through); they win over
   * any header of the same name. May be async (a token fetched, a body signed).
   */
  authorize: (req: OutgoingRequest) => Record<string, string> | Promise<Record<string, string>>
  /**
   * A successful streamed answer framed the platform's way (AWS event-stream), turned into the
   * Server-Sent Events the provider protocol's stream mapper reads. Absent: the answer is SSE.
   */
  decodeStream?: (body: Readable, contentType: string | undefined) => Readable
  /**
   * An error answer's body in the shape the provider protocol's pair reads (Bedrock's
   * `{message}` with the error's name in a header). Absent: the body is read as it is.
   */
  errorBody?: (status: number, headers: Readonly<Record<string, string | string[] | undefined>>, body: unknown) => unknown
  /**
   * The upstream refused the credentials (401): renew them. Resolves true when there are new ones
   * to try (the call is sent once more), false when renewing cannot help. Absent: never renewed.
   */
  refresh?: () => Promise<boolean>
  /** The credential strings in use now (fetched tokens included), masked wherever an answer would carry them on. */
  secrets: () => readonly string[]
  close?: () => Promise<void>
}

/** What a platform is made with, beside its provider's config. */
export interface PlatformDeps {
  /** Milliseconds since the epoch (tests pass a fake clock: token expiries). */
  now: () => number
  /** The environment (AWS_* variables for Bedrock); read when the platform is made, at start and at reload. */
  env: Readonly<Record<string, string | undefined>>
}
