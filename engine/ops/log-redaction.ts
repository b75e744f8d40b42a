import type { FastifyRequest, FastifyServerOptions } from 'fastify'

// Keys and tokens never reach the logs. No header is logged; but a key may come in the URL, which
// every request's log line carries: Gemini clients may send theirs as `?key=…` (the Gemini routes
// read it there), and any client may put one in by mistake (`?api_key=…`). The logged URL keeps
// its path and query, with the value of any parameter whose name looks like a credential, and
// anything shaped like a gateway or provider key, replaced.

/** A query parameter's name that says its value is a credential (`key`, `api_key`, `access_token`, `sig`...). */
export const SECRET_PARAM = /key|token|secret|passw|auth|signature|credential|^sig$/i
const KEY_SHAPED = /\b(?:mg|sk)-[A-Za-z0-9_-]{8,}/g

const decode = (s: string): string => {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '))
  } catch {
    return s
  }
}

/** A URL as it may be logged. */
export function redactUrl (url: string): string {
  const q = url.indexOf('?')
  const path = (q < 0 ? url : url.slice(0, q)).replace(KEY_SHAPED, '[redacted]')
  if (q < 0) return path
  const query = url.slice(q + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=')
    if (eq >= 0 && SECRET_PARAM.test(decode(pair.slice(0, eq)))) return `${pair.slice(0, eq)}=[redacted]`
    return pair.replace(KEY_SHAPED, '[redacted]')
  })
  return `${path}?${query.join('&')}`
}

type LoggerOption = FastifyServerOptions['logger']

/** The logger option with a request serializer that logs the redacted URL (false stays false). */
export function redactingLogger (logger: LoggerOption): LoggerOption {
  if (logger === undefined || logger === false) return false
  const base = logger === true ? {} : logger
  return {
    ...base,
    serializers: {
      ...base.serializers,
      req: (req: FastifyRequest) => ({ method: req.method, url: redactUrl(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort })
    }
  }
}
