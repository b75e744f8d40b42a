import { createHash } from 'node:crypto'
import { posix } from 'node:path'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { shippedFile, shippedFiles } from '../../paths.js'

// A console page served from memory, for the executable file, whose pages are assets of the file
// rather than files on disk for @fastify/static to send. The same routes as @fastify/static's with
// `wildcard: false`: one per file, and a folder's index.html at the folder's path too; GET and
// HEAD; an ETag of the contents, answered 304 when a browser already has them. A dot-file (the
// build's list of what it made, .files) is not a page and is not served, as @fastify/static
// does not serve one.

// the kinds of files a console page is built into, typed as @fastify/static types them
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2'
}

export interface ShippedPageOptions {
  /** The page's folder, from the project root. */
  folder: string[]
  /** Files of the folder not to serve (by their path in it, with /). */
  skip?: (path: string) => boolean
  /** Headers of a file's answer (as @fastify/static's setHeaders gets them). */
  setHeaders: (res: { setHeader: (name: string, value: string) => unknown }, path: string) => void
}

export const shippedPage: FastifyPluginAsync<ShippedPageOptions> = async (fastify, opts) => {
  for (const path of shippedFiles(...opts.folder)) {
    if (opts.skip?.(path) === true || path.split('/').some((part) => part.startsWith('.'))) continue
    const body = shippedFile(...opts.folder, ...path.split('/'))
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
    const type = TYPES[posix.extname(path)] ?? 'application/octet-stream'
    const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
      opts.setHeaders({ setHeader: (name, value) => reply.header(name, value) }, path)
      reply.header('etag', etag)
      if (request.headers['if-none-match']?.split(',').some((t) => t.trim().replace(/^W\//, '') === etag) === true) return await reply.status(304).send()
      return await reply.type(type).send(body)
    }
    fastify.get(`/${path}`, handler)
    if (posix.basename(path) === 'index.html') {
      const dir = posix.dirname(path)
      fastify.get(dir === '.' ? '/' : `/${dir}/`, handler)
    }
  }
}
