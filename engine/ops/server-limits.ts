import { maxHeaderSize, STATUS_CODES, type ServerOptions, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { ServerConfig } from '../../config/schema.js'
import { ClientTimeout, errorBody, HeadersTooLarge, MalformedRequest, type ErrorFamily, type GatewayError } from '../kernel/errors.js'

// The HTTP server's own limits on slow or broken clients, and the errors Node reports before a
// request reaches Fastify, rendered in the gateway's shapes.
//
// Timeouts (server: in the config):
//   headers_timeout_s     the request line and headers must arrive within this (slow-header clients)
//   client_timeout_s      the whole request, headers and body, must arrive within this (slow bodies);
//                         Node stops timing a request once its body is in, so a response may stream
//                         for as long as it lasts
//   keep_alive_timeout_s  an idle keep-alive connection is closed after this
//   idle_timeout_s        a connection with no traffic either way for this long is closed (a client
//                         that stops reading); longer than request_timeout_s by default, so the
//                         gateway's own 408 or stream-idle error is sent first

export interface ServerTimeouts {
  connectionTimeout: number
  requestTimeout: number
  keepAliveTimeout: number
  http: ServerOptions
}

const ms = (s: number): number => Math.max(1, Math.round(s * 1000))

/** The Fastify constructor options that carry the config's timeouts. */
export function serverTimeouts (server: ServerConfig): ServerTimeouts {
  const headersTimeout = ms(server.headers_timeout_s)
  const requestTimeout = ms(server.client_timeout_s)
  return {
    connectionTimeout: ms(server.idle_timeout_s ?? server.request_timeout_s + 30),
    requestTimeout,
    keepAliveTimeout: ms(server.keep_alive_timeout_s),
    // Node checks the header and request timeouts on a timer, every 30 s by default: a slow client
    // could outstay its timeout by that much
    http: { headersTimeout, connectionsCheckingInterval: Math.min(5000, Math.max(25, Math.floor(Math.min(headersTimeout, requestTimeout) / 4))) }
  }
}

interface ClientError extends Error {
  code?: string
  rawPacket?: unknown
}

// What Node knows of a socket's request in progress (undocumented fields, read defensively).
interface HttpSocket extends Socket { _httpMessage?: ServerResponse & { req?: { url?: string } } }

const familyOfRequestLine = (line: string): ErrorFamily => /^[A-Z]+ \/v1\/messages(?=[/?# ]|$)/.test(line) ? 'messages' : 'openai'

/**
 * Fastify's clientErrorHandler: a malformed request, headers over Node's size limit (431), or a
 * request not received in time (408) is answered in the numeric-code shape, or the Messages shape
 * for /v1/messages, then the connection is closed. There is no reply object yet, so no trace id.
 */
export function clientErrorHandler (server: ServerConfig): (err: ClientError, socket: Socket) => void {
  return (err, raw) => {
    const socket = raw as HttpSocket
    if (err.code === 'ECONNRESET' || socket.destroyed) return
    const inFlight = socket._httpMessage
    let error: GatewayError
    // before its headers are in, a request is not handed on yet: the headers timeout it was
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') error = new ClientTimeout({ seconds: inFlight === undefined ? server.headers_timeout_s : server.client_timeout_s })
    else if (err.code === 'HPE_HEADER_OVERFLOW') error = new HeadersTooLarge({ max_kb: Math.floor(maxHeaderSize / 1024) })
    else error = new MalformedRequest()
    const start = inFlight?.req?.url !== undefined ? `GET ${inFlight.req.url}` : Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1', 0, 256) : ''
    // a response already begun (say, a 401 sent before the body was read) must not be corrupted
    if (socket.writable && inFlight?.headersSent !== true) {
      const status = error.statusCode
      const body = JSON.stringify(errorBody(familyOfRequestLine(start), { status, message: error.message, code: error.spec.code, openaiType: error.spec.openaiType, messagesType: error.spec.messagesType }))
      const retry = error.spec.retry === false ? 'x-should-retry: false\r\n' : ''
      socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${retry}connection: close\r\n\r\n${body}`)
    }
    socket.destroy()
  }
}
