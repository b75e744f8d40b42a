import { definePlugin } from './api/index.js'
import { TracingSchema } from '../config/schema.js'

// Gateway hook: onCallEnd. One OpenTelemetry span per call, with a child span per attempt at a
// provider, made from the call's outcome when it ends and sent over OTLP/HTTP in batches. On when
// the config's `tracing.otlp_endpoint` is set (its options are that section); it runs after the
// chain's own plugins.

export default definePlugin({
  name: 'tracing',
  description: 'an OpenTelemetry span per call and per attempt, over OTLP/HTTP (enabled by tracing.otlp_endpoint)',
  options: TracingSchema,
  plugin: async (fastify, options) => {
    // loaded when the chain is mounted, not with the plugin's definition (`config check` reads its options alone)
    const { createTracer } = await import('../engine/ops/tracing/index.js')
    // a provider on a cloud platform is named by its platform (azure.openai, gcp.vertex_ai, aws.bedrock)
    const tracer = await createTracer(options, fastify.gateway.log, (id) => fastify.gateway.upstreams.get(id)?.platform.traceName ?? null)
    if (tracer === null) return
    fastify.gateway.addHook('onCallEnd', (outcome) => { tracer.call(outcome) })
    fastify.addHook('onClose', async () => { await tracer.shutdown() })
  }
})
