import type { Clock } from '../kernel/clock.js'

// What the gateway knows of each provider's health: a circuit breaker and a moving average of
// its time to first byte. Kept by provider id for the life of the process, so that a reloaded
// configuration starts from what the previous one learnt.
//
// The breaker: `closed` lets every call through and counts consecutive failures (a 5xx, a
// refused or reset connection, a timeout); after `failures` of them it is `open` and the provider
// gets no calls for `openMs`. Then the next call that picks it is its probe (`half_open`: one at
// a time, the others skip it): a real call, whose answer closes the breaker, and whose failure
// opens it again for another `openMs`. Time is the gateway's Clock.
//
// Each provider also keeps its last RECENT failures (when, the status, a short error) in a ring
// of fixed size, for the admin API; only a failure writes to it, never a successful call.

export type BreakerState = 'closed' | 'open' | 'half_open'

export interface HealthOptions {
  /** Consecutive failures that open the breaker. */
  failures: number
  /** How long an open breaker keeps the provider out before a probe. */
  openMs: number
  /** Weight of a new sample in the time-to-first-byte average (0–1]. */
  smoothing: number
}

export interface ProviderHealth {
  readonly id: string
  state: BreakerState
  /** Consecutive failures. */
  failures: number
  openedAt: number
  /** A half-open probe is in flight. */
  probing: boolean
  /** Moving average of the time to first byte, ms; null before the first answer. */
  ttfbMs: number | null
  /** The last RECENT_FAILURES failures, a ring written at `nextFailure`. */
  recentFailures: FailureNote[]
  nextFailure: number
}

export type StateListener = (id: string, state: BreakerState, from: BreakerState) => void

/** A failed attempt, as the provider's recent failures keep it. */
export interface FailureNote {
  /** The gateway clock's time (ms). */
  at: number
  /** The HTTP status, when the provider answered. */
  status: number | null
  /** A short error (a code such as ECONNREFUSED, or server_error). */
  error: string
}

/** One process's view of a provider (HealthBook.snapshot), as the admin API merges the workers' views. */
export interface ProviderView {
  state: BreakerState
  ttfbMs: number | null
  /** Newest first. */
  failures: FailureNote[]
}

/** Every process's view of the providers: its pid and what it has seen. */
export interface HealthReport {
  pid: number
  providers: Record<string, ProviderView>
  /** The MCP servers behind /mcp as this process's links see them (each worker has its own connections). */
  mcp?: Array<{ id: string, transport: 'http' | 'stdio', status: 'ready' | 'starting' | 'down', tools: string[], last_error: string | null }>
}

/** How many failures a provider keeps. */
export const RECENT_FAILURES = 10

export const DEFAULT_HEALTH: HealthOptions = { failures: 5, openMs: 30_000, smoothing: 0.3 }

export class HealthBook {
  private readonly byId = new Map<string, ProviderHealth>()
  private readonly listeners: StateListener[] = []

  constructor (private readonly clock: Clock, public options: HealthOptions = DEFAULT_HEALTH) {}

  /** Hears every change of a breaker's state; returns what stops it. */
  onState (fn: StateListener): () => void {
    this.listeners.push(fn)
    return () => { const i = this.listeners.indexOf(fn); if (i >= 0) this.listeners.splice(i, 1) }
  }

  of (id: string): ProviderHealth {
    let h = this.byId.get(id)
    if (h === undefined) {
      h = { id, state: 'closed', failures: 0, openedAt: 0, probing: false, ttfbMs: null, recentFailures: [], nextFailure: 0 }
      this.byId.set(id, h)
    }
    return h
  }

  all (): ProviderHealth[] { return [...this.byId.values()] }

  /** Whether a call could go to the provider now (nothing is taken). */
  usable (id: string): boolean {
    const h = this.of(id)
    if (h.state === 'closed') return true
    if (h.state === 'half_open') return !h.probing
    return this.clock.now() - h.openedAt >= this.options.openMs
  }

  /** Lets a call go to the provider, or not; a call let through a due breaker is its probe. */
  admit (id: string): boolean {
    const h = this.of(id)
    if (h.state === 'closed') return true
    if (!this.usable(id)) return false
    if (h.state === 'open') this.move(h, 'half_open')
    h.probing = true
    return true
  }

  /** The provider answered (any status below 500), after `ttfbMs`. */
  success (id: string, ttfbMs?: number): void {
    const h = this.of(id)
    h.failures = 0
    h.probing = false
    if (ttfbMs !== undefined) h.ttfbMs = h.ttfbMs === null ? ttfbMs : h.ttfbMs + this.options.smoothing * (ttfbMs - h.ttfbMs)
    if (h.state !== 'closed') this.move(h, 'closed')
  }

  /** The provider failed (a 5xx, a refused or reset connection, a timeout); `note` says how, for its recent failures. */
  failure (id: string, note?: { status: number | null, error: string }): void {
    const h = this.of(id)
    h.failures++
    if (note !== undefined) {
      const entry: FailureNote = { at: this.clock.now(), status: note.status, error: note.error }
      if (h.recentFailures.length < RECENT_FAILURES) h.recentFailures.push(entry)
      else h.recentFailures[h.nextFailure] = entry
      h.nextFailure = (h.nextFailure + 1) % RECENT_FAILURES
    }
    h.probing = false
    if (h.state === 'half_open' || (h.state === 'closed' && h.failures >= this.options.failures)) {
      h.openedAt = this.clock.now()
      this.move(h, 'open')
    }
  }

  /** The provider's recent failures, newest first. */
  recentFailures (id: string): FailureNote[] {
    const h = this.byId.get(id)
    if (h === undefined) return []
    const ring = h.recentFailures
    const out: FailureNote[] = []
    // the newest is just before the next slot to write
    for (let i = 1; i <= ring.length; i++) out.push(ring[(h.nextFailure - i + RECENT_FAILURES) % RECENT_FAILURES] as FailureNote)
    return out
  }

  /** What this process knows of each provider it has seen: breaker, latency average, recent failures (newest first). */
  snapshot (): Record<string, ProviderView> {
    const out: Record<string, ProviderView> = {}
    for (const [id, h] of this.byId) out[id] = { state: h.state, ttfbMs: h.ttfbMs, failures: this.recentFailures(id) }
    return out
  }

  /** An attempt ended without a verdict (the client went away): a probe's turn passes to the next call. */
  release (id: string): void {
    this.of(id).probing = false
  }

  private move (h: ProviderHealth, to: BreakerState): void {
    const from = h.state
    h.state = to
    for (const fn of this.listeners) fn(h.id, to, from)
  }
}
