import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions } from 'pino'

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'

interface LevelAware extends FastifyBaseLogger { isLevelEnabled: (level: string) => boolean }

/**
 * Fastify's childLoggerFactory: a request's child logger (the one that adds its trace_id) made on
 * its first log call at an enabled level. Fastify makes one per request, and pino's child() was
 * about 1% of a call's CPU, spent for nothing by the calls that log nothing (every call at the
 * `warn` level operators run under load, and the bench's `error`). At `info` Fastify logs every
 * request, so the child is made at once, as before. A route-level logLevel, which could make the
 * child more verbose than its parent, gets a plain child.
 */
export function lazyChildLogger (logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  const parent = logger as LevelAware
  if (opts.level !== undefined || typeof parent.isLevelEnabled !== 'function') return logger.child(bindings, opts)
  return new LazyLogger(parent, bindings, opts) as unknown as FastifyBaseLogger
}

class LazyLogger {
  private made: FastifyBaseLogger | null = null

  constructor (private readonly parent: LevelAware, private readonly bindings: Bindings, private readonly opts: ChildLoggerOptions) {}

  private get real (): FastifyBaseLogger {
    if (this.made === null) this.made = this.parent.child(this.bindings, this.opts)
    return this.made
  }

  private log (level: Level, args: unknown[]): void {
    // once made (or given its own level), the child decides
    if (((this.made ?? this.parent) as LevelAware).isLevelEnabled(level)) (this.real[level] as (...a: unknown[]) => void)(...args)
  }

  get level (): string { return this.made?.level ?? this.parent.level }
  set level (value: string) { this.real.level = value }

  fatal (...args: unknown[]): void { this.log('fatal', args) }
  error (...args: unknown[]): void { this.log('error', args) }
  warn (...args: unknown[]): void { this.log('warn', args) }
  info (...args: unknown[]): void { this.log('info', args) }
  debug (...args: unknown[]): void { this.log('debug', args) }
  trace (...args: unknown[]): void { this.log('trace', args) }
  silent (): void {}
  child (bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger { return this.real.child(bindings, opts) }
}
