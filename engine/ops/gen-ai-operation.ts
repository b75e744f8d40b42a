import type { Endpoint } from '../../plugins/api/index.js'

const OPERATIONS: Partial<Record<Endpoint, string>> = { embeddings: 'embeddings', 'images.generations': 'generate_content', 'mcp.tools_call': 'execute_tool' }

/**
 * The OpenTelemetry GenAI operation name of a call (gen_ai.operation.name), for its metrics and
 * spans: a model call is a chat, an embedding an embeddings, an image a generate_content, an MCP
 * tool call an execute_tool.
 */
export const operationOf = (endpoint: Endpoint): string => OPERATIONS[endpoint] ?? 'chat'
