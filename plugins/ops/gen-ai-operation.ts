import type { Endpoint } from '../api/index.js'

/** The OpenTelemetry GenAI operation name of a call (gen_ai.operation.name), for its metrics and spans. */
export const operationOf = (endpoint: Endpoint): string => endpoint === 'embeddings' ? 'embeddings' : endpoint === 'images.generations' ? 'generate_content' : 'chat'
