import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../../../config/schema.js'
import { nanoToUsd, type CallOutcome } from '../../../plugins/api/index.js'
import { SpanKind } from '@opentelemetry/api'
import { operationOf } from '../gen-ai-operation.js'
import type { SpanData } from './otlp.js'

// Traces, when `tracing.otlp_endpoint` is set: one span per call (kind server), named like the
// OpenTelemetry GenAI conventions ("chat openai/gpt-4o-mini"), with their attributes
// (gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model, gen_ai.usage.*), and a child
// span per attempt at a provider (kind client), retries and failovers included. The spans are
// made when the call ends, from its outcome, so a call pays nothing for tracing while it runs.
//
// The trace id IS the call's {prefix}Trace-ID: the same 128 bits, without the dashes (the
// response header, the usage record's trace_id and the log lines' trace_id all name the trace).

export interface CallTracer {
  call: (outcome: CallOutcome) => void
  shutdown: () => Promise<void>
}

const ROUTES: Record<string, string> = {
  'chat.completions': '/v1/chat/completions',
  messages: '/v1/messages',
  responses: '/v1/responses',
  generate_content: '/v1beta/models/{model}:generateContent',
  embeddings: '/v1/embeddings',
  'images.generations': '/v1/images/generations',
  passthrough: '/passthrough',
  'mcp.tools_call': '/mcp'
}

const spanId = (): string => randomBytes(8).toString('hex')
/** The OpenTelemetry trace id of a call: its trace id's hex digits. */
export const otelTraceId = (traceId: string): string => traceId.replace(/-/g, '')

/** Wall-clock ms of a performance.now() reading. */
const wall = (perf: number): number => performance.timeOrigin + perf

/**
 * The spans of a call. `platformOf` gives a provider's cloud platform as the conventions name it
 * (`azure.openai`, `gcp.vertex_ai`, `aws.bedrock`): gen_ai.provider.name then, the provider's id in
 * modelgate.provider; on a vendor's own API (null) gen_ai.provider.name is the provider's id.
 */
export function callSpans (o: CallOutcome, platformOf: (provider: string) => string | null = () => null): SpanData[] {
  const traceId = otelTraceId(o.traceId)
  const root = spanId()
  const op = operationOf(o.endpoint)
  // the GenAI conventions' execute_tool span for an MCP tool call, named by the tool
  const tool = o.endpoint === 'mcp.tools_call'
  const endMs = wall(o.t1)
  const startMs = wall(o.t0)
  const failed = o.status !== 'ok'
  const spans: SpanData[] = [{
    traceId,
    spanId: root,
    name: o.model === null ? op : `${op} ${o.model}`,
    kind: SpanKind.SERVER,
    startMs,
    endMs: Math.max(endMs, startMs),
    attributes: {
      'gen_ai.operation.name': op,
      'gen_ai.provider.name': o.provider === null ? null : platformOf(o.provider) ?? o.provider,
      'modelgate.provider': o.provider ?? undefined,
      'gen_ai.request.model': tool ? undefined : o.model,
      'gen_ai.tool.name': tool ? o.model : undefined,
      'gen_ai.usage.input_tokens': o.billed ? o.usage.prompt_tokens : undefined,
      'gen_ai.usage.output_tokens': o.billed ? o.usage.completion_tokens : undefined,
      'gen_ai.usage.cache_read.input_tokens': o.billed ? o.usage.cached_input_tokens : undefined,
      'http.request.method': 'POST',
      'http.route': ROUTES[o.endpoint],
      'http.response.status_code': o.httpStatus,
      'error.type': failed ? o.status : undefined,
      'modelgate.trace_id': o.traceId,
      'modelgate.status': o.status,
      'modelgate.stream': o.stream,
      'modelgate.org': o.principal?.org,
      'modelgate.project': o.principal?.project,
      'modelgate.cost_usd': o.billed ? nanoToUsd(o.costNano) : undefined,
      'modelgate.overhead_ms': o.overheadMs === null ? undefined : Math.round(o.overheadMs * 1000) / 1000
    },
    error: failed ? o.status : undefined
  }]
  for (const a of o.attempts) {
    const ok = a.outcome === 'ok' || a.outcome === 'client_error'
    spans.push({
      traceId,
      spanId: spanId(),
      parentSpanId: root,
      name: `${op} ${a.provider}`,
      kind: SpanKind.CLIENT,
      startMs: wall(a.start),
      endMs: wall(a.end),
      attributes: {
        'gen_ai.operation.name': op,
        'gen_ai.provider.name': platformOf(a.provider) ?? a.provider,
        'modelgate.provider': a.provider,
        'gen_ai.request.model': a.upstreamModel ?? o.upstreamModel ?? o.model,
        'http.response.status_code': a.status ?? undefined,
        'error.type': ok ? undefined : a.outcome,
        'modelgate.attempt': a.n,
        'modelgate.retry': a.retry,
        'modelgate.failover': a.failover
      },
      error: ok ? undefined : a.outcome
    })
  }
  return spans
}

/** The tracer of a configuration, or null when tracing is off. */
export async function createTracer (config: Config['tracing'], log: FastifyBaseLogger, platformOf?: (provider: string) => string | null): Promise<CallTracer | null> {
  if (config.otlp_endpoint === '') return null
  let failing = false
  // loaded here, when traces are sent: every process that checks a config imports this module
  const { OtlpExporter } = await import('./otlp.js')
  const exporter = new OtlpExporter({
    endpoint: config.otlp_endpoint,
    headers: config.headers,
    timeoutMs: config.timeout_s * 1000,
    resource: { 'service.name': config.service_name, 'telemetry.sdk.name': 'modelgate', 'telemetry.sdk.language': 'nodejs' },
    onError: (err) => {
      // said once: a collector that is away would fill the log
      if (!failing) log.warn({ err, endpoint: config.otlp_endpoint }, 'sending traces failed')
      failing = true
    }
  })
  return {
    call: (outcome) => { exporter.export(callSpans(outcome, platformOf)) },
    shutdown: async () => { await exporter.shutdown() }
  }
}
