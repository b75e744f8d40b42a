import { SpanKind as OtelSpanKind, SpanStatusCode, TraceFlags, type Attributes, type HrTime } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base'

// Spans sent with the OpenTelemetry SDK's OTLP/HTTP exporter (JSON bodies, what every
// OpenTelemetry collector, Jaeger, Tempo and the like accept on /v1/traces) behind its batch
// processor: queued, sent in batches at most every second or as soon as a batch is full, and
// dropped when the queue is full because the collector is slow or away. Sending never delays a
// call. The spans of a call are made when the call ends, from its record (see index.ts), and
// handed over as finished spans, so a call pays nothing for tracing while it runs.

export type AttributeValue = string | number | boolean

export const SpanKind = { internal: OtelSpanKind.INTERNAL, server: OtelSpanKind.SERVER, client: OtelSpanKind.CLIENT } as const

export interface SpanData {
  /** 32 hex digits. */
  traceId: string
  /** 16 hex digits. */
  spanId: string
  parentSpanId?: string
  name: string
  kind: OtelSpanKind
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
  /** How long one batch may take to send, retries included (ms); then it is dropped. */
  timeoutMs: number
  /** Hears send failures (once per failing batch). */
  onError: (err: unknown) => void
}

const hrTime = (ms: number): HrTime => {
  const seconds = Math.floor(ms / 1000)
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)]
}

export class OtlpExporter {
  private readonly processor: BatchSpanProcessor
  private readonly resource

  constructor (opts: ExporterOptions) {
    this.resource = resourceFromAttributes(opts.resource)
    // the exporter retries a collector that is away (backing off) until timeoutMillis has passed
    const otlp = new OTLPTraceExporter({ url: opts.endpoint, headers: opts.headers, timeoutMillis: opts.timeoutMs })
    // the batch processor keeps send failures to itself: this tells the gateway's log
    const exporter: SpanExporter = {
      export: (spans, done) => {
        otlp.export(spans, (result) => {
          if (result.error !== undefined || result.code !== 0) opts.onError(result.error ?? new Error('the trace collector refused the spans'))
          done(result)
        })
      },
      shutdown: async () => { await otlp.shutdown() },
      forceFlush: async () => { await otlp.forceFlush() }
    }
    this.processor = new BatchSpanProcessor(exporter, { maxQueueSize: 8192, maxExportBatchSize: 512, scheduledDelayMillis: 1000, exportTimeoutMillis: opts.timeoutMs })
  }

  export (spans: SpanData[]): void {
    for (const s of spans) this.processor.onEnd(this.readable(s))
  }

  // a failed send was reported through onError already: closing never fails on it
  /** Sends what is queued; resolves once it is answered. */
  async flush (): Promise<void> { await this.processor.forceFlush().catch(() => {}) }

  /** Sends what is queued (each batch within timeoutMs) and stops. */
  async shutdown (): Promise<void> { await this.processor.shutdown().catch(() => {}) }

  private readable (s: SpanData): ReadableSpan {
    const attributes: Attributes = {}
    for (const [k, v] of Object.entries(s.attributes)) if (v !== null && v !== undefined) attributes[k] = v
    const context = { traceId: s.traceId, spanId: s.spanId, traceFlags: TraceFlags.SAMPLED }
    return {
      name: s.name,
      kind: s.kind,
      spanContext: () => context,
      parentSpanContext: s.parentSpanId === undefined ? undefined : { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: TraceFlags.SAMPLED },
      startTime: hrTime(s.startMs),
      endTime: hrTime(s.endMs),
      duration: hrTime(s.endMs - s.startMs),
      status: s.error === undefined ? { code: SpanStatusCode.OK } : { code: SpanStatusCode.ERROR, message: s.error },
      attributes,
      links: [],
      events: [],
      ended: true,
      resource: this.resource,
      instrumentationScope: { name: 'modelgate' },
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0
    }
  }
}
