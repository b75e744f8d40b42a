import type { McpServerConfig } from '../../config/schema.js'
import { secretsOf } from '../upstream/credentials.js'

// What of an MCP server's configuration is a secret, to be masked wherever a server's answer
// would carry it to a client (engine/upstream/credentials.ts masks it, as it does a provider's
// key): every header value of an HTTP server, and the environment values of a stdio server that
// look like one, by their name (`GITHUB_TOKEN`, `API_KEY`, `DB_PASSWORD`…) or their shape (a long
// run of letters and digits, not a path; the password of a URL). Other values (`LOG_LEVEL:
// warn`, `ROOT: /srv/shared`) are ordinary text that results may well hold.

const SECRET_NAME = /key|token|secret|passw|pwd|auth|credential|private|cookie|session|signature|cert/i
// letters and digits mixed, 16 or more, as API keys and tokens are; not a path
const TOKEN_SHAPE = /^(?![./~])(?=[^\s]*[A-Za-z])(?=[^\s]*\d)[A-Za-z0-9+/=_.:-]{16,}$/
const URL_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/:@\s]*:([^@\s/]+)@/i

/** The secrets of one MCP server's configuration, longest first. */
export function serverSecrets (server: Pick<McpServerConfig, 'headers' | 'env'>): string[] {
  const values = Object.values(server.headers ?? {})
  for (const [name, value] of Object.entries(server.env ?? {})) {
    if (SECRET_NAME.test(name) || TOKEN_SHAPE.test(value)) values.push(value)
    const password = URL_PASSWORD.exec(value)?.[1]
    if (password !== undefined) values.push(password)
  }
  return secretsOf(values)
}
