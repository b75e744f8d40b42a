import { request } from 'undici'

// A span exporter speaking OTLP over HTTP with JSON bodies (what every OpenTelemetry collector,
// Jaeger, Tempo and the like accept on /v1/traces): spans are queued and sent in batches, at
// most every second or as soon as a batch is full, and dropped (counted) when the queue is full
// because the collector is slow or away. Sending never delays a call.

export type AttributeValue = string | number | boolean

export const SpanKind = { internal: 1, server: 2, client: 3 } as const

export interface SpanData {
  /** 32 hex digits. */
  traceId: string
  /** 16 hex digits. */
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  /** Unix time in ms (fractions allowed). */
  startMs: number
  endMs: number
  attributes: Record<string, AttributeValue | null | undefined>
  /** Set when the operation failed. */
  error?: string
}

export interface ExporterOptions {
  endpoint: string
  headers?: Record<string, string>
  /** Resource attributes (service.name...). */
  resource: Record<string, AttributeValue>
  /** Hears send failures (once per failing batch). */
  onError: (err: unknown) => void
  batchSize?: number
  maxQueue?: number
  intervalMs?: number
}

interface OtlpAttribute { key: string, value: { stringValue?: string, intValue?: string, doubleValue?: number, boolValue?: boolean } }

function attributes (attrs: Record<string, AttributeValue | null | undefined>): OtlpAttribute[] {
  const out: OtlpAttribute[] = []
  for (const [key, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue
    if (typeof v === 'string') out.push({ key, value: { stringValue: v } })
    else if (typeof v === 'boolean') out.push({ key, value: { boolValue: v } })
    else if (Number.isInteger(v)) out.push({ key, value: { intValue: String(v) } })
    else out.push({ key, value: { doubleValue: v } })
  }
  return out
}

// nanoseconds as a decimal string, from ms with a fraction, without losing digits to floats
const nanos = (ms: number): string => {
  const whole = Math.floor(ms)
  const frac = Math.round((ms - whole) * 1e6)
  return (BigInt(whole) * 1_000_000n + BigInt(frac)).toString()
}

export function encodeSpans (spans: SpanData[], resource: Record<string, AttributeValue>): unknown {
  return {
    resourceSpans: [{
      resource: { attributes: attributes(resource) },
      scopeSpans: [{
        scope: { name: 'modelgate' },
        spans: spans.map((s) => ({
          traceId: s.traceId,
          spanId: s.spanId,
          ...(s.parentSpanId === undefined ? {} : { parentSpanId: s.parentSpanId }),
          name: s.name,
          kind: s.kind,
          startTimeUnixNano: nanos(s.startMs),
          endTimeUnixNano: nanos(s.endMs),
          attributes: attributes(s.attributes),
          status: s.error === undefined ? { code: 1 } : { code: 2, message: s.error }
        }))
      }]
    }]
  }
}

export class OtlpExporter {
  private queue: SpanData[] = []
  private timer: NodeJS.Timeout | null = null
  private sending: Promise<void> = Promise.resolve()
  /** Spans dropped because the queue was full. */
  dropped = 0
  private readonly batchSize: number
  private readonly maxQueue: number
  private readonly intervalMs: number

  constructor (private readonly opts: ExporterOptions) {
    this.batchSize = opts.batchSize ?? 512
    this.maxQueue = opts.maxQueue ?? 8192
    this.intervalMs = opts.intervalMs ?? 1000
  }

  export (spans: SpanData[]): void {
    for (const s of spans) {
      if (this.queue.length >= this.maxQueue) { this.dropped++; continue }
      this.queue.push(s)
    }
    if (this.queue.length >= this.batchSize) { this.send(); return }
    if (this.timer === null) {
      this.timer = setTimeout(() => { this.timer = null; this.send() }, this.intervalMs)
      this.timer.unref()
    }
  }

  /** Sends what is queued; resolves once every batch sent so far is answered. */
  async flush (): Promise<void> {
    if (this.timer !== null) { clearTimeout(this.timer); this.timer = null }
    while (this.queue.length > 0) this.send()
    await this.sending
  }

  async shutdown (): Promise<void> { await this.flush() }

  private send (): void {
    const batch = this.queue.splice(0, this.batchSize)
    if (batch.length === 0) return
    const body = JSON.stringify(encodeSpans(batch, this.opts.resource))
    // one batch at a time, in order
    this.sending = this.sending.then(async () => {
      try {
        const res = await request(this.opts.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...this.opts.headers },
          body,
          headersTimeout: 10_000,
          bodyTimeout: 10_000
        })
        await res.body.text()
        if (res.statusCode >= 300) throw new Error(`the trace collector answered ${res.statusCode}`)
      } catch (err) {
        this.opts.onError(err)
      }
    })
  }
}
