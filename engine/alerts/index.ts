import { randomUUID } from 'node:crypto'
import type { EventEmitter } from 'node:events'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { LookupFunction } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import { Webhook } from 'standardwebhooks'
import type { AlertEvent, AlertsConfig } from '../../config/schema.js'
import type { Clock } from '../kernel/clock.js'
import { nanoToUsd, usdToNano } from '../kernel/money.js'
import type { QuotaCounted } from '../../plugins/quota.js'
import type { AlertDelivery, NewAlert, Store } from '../store/types.js'
import type { BreakerState, HealthBook } from '../upstream/health.js'
import { webhookAddress, type Lookup } from './webhook-url.js'

// Spend signals by webhook, on the Standard Webhooks specification (signed `webhook-id`,
// `webhook-timestamp`, `webhook-signature`): budget.threshold, quota.threshold, balance.low,
// key.expiring, provider.down and provider.up.
//
// An event is written to the store's outbox before it is sent, one row per webhook that asked
// for its type, under the crossing that raised it (a threshold of one window, a balance's
// episode, an expiry notice, a breaker's change): the store writes a crossing once whichever
// worker or instance gets there first. Senders (every serving process) claim due rows for a
// while, send them, and record the answer; a row not delivered is tried again with backoff for
// 24 hours from when it was raised, across restarts (a claim left by a process that died lapses).

/** Between attempts, by the attempt just made (1-based); the last repeats until 24 hours are out. */
export const BACKOFF_MS = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000]
/** How long deliveries are tried after their event was raised. */
export const RETRY_FOR_MS = 24 * 3_600_000
/** How long one attempt may take. */
export const SEND_TIMEOUT_MS = 10_000
/** How long a sender holds what it claimed: past it, another may send it (the sender died). */
export const CLAIM_MS = SEND_TIMEOUT_MS + 5_000
const DAY_MS = 86_400_000
/** How long this process remembers a crossing it raised, sparing the store a write per call past a threshold. */
const FORGET_MS = 3_600_000
/** The notices before a key expires, nearest first. */
const EXPIRY_NOTICES: Array<[string, number]> = [['1d', DAY_MS], ['7d', 7 * DAY_MS]]

export interface AlertsOptions {
  /** Resolves a webhook's host (tests: a fixed answer). */
  lookup?: Lookup
  /** The time written in webhook-timestamp (the wall clock: receivers judge it against theirs). */
  wallNow?: () => number
}

/** What an attempt at a webhook got. */
interface Sent { status: number | null, error: string | null }

export class Alerts {
  private readonly hooks: Array<{ url: string, events: ReadonlySet<string>, signer: Webhook }>
  /** Crossings this process raised (or found raised), and when: not written again; forgotten after an hour (the store still writes each once). */
  private readonly raised = new Map<string, number>()
  private readonly timers: NodeJS.Timeout[] = []
  private ticking: Promise<void> | null = null
  private again = false
  private stopped = false
  private started = false
  private readonly offs: Array<() => void> = []

  constructor (
    private readonly config: AlertsConfig,
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    events: EventEmitter,
    private readonly opts: AlertsOptions = {}
  ) {
    this.hooks = config.webhooks.map((w) => ({ url: w.url, events: new Set(w.events), signer: new Webhook(w.secret) }))
    // without webhooks nothing listens: the quota plugin then tells nothing after its counts
    if (this.hooks.length > 0) {
      const onCounted = (c: QuotaCounted): void => { this.counted(c) }
      events.on('quota.counted', onCounted)
      this.offs.push(() => { events.off('quota.counted', onCounted) })
    }
  }

  get enabled (): boolean { return this.hooks.length > 0 }

  /** Starts sending and scanning (a serving process); `stop` ends it. */
  start (health: HealthBook | undefined, opts: { tickMs?: number, scanMs?: number } = {}): void {
    if (!this.enabled) return
    this.started = true
    const off = health?.onState((id, to, from) => { this.breaker(id, to, from, health) })
    if (off !== undefined) this.offs.push(off)
    const every = (ms: number, fn: () => unknown): void => {
      const t = setInterval(() => { void fn() }, ms)
      t.unref()
      this.timers.push(t)
    }
    every(opts.tickMs ?? 1000, async () => { await this.tick() })
    every(opts.scanMs ?? 60_000, async () => { await this.scan() })
    void this.scan()
    void this.tick()
  }

  async stop (): Promise<void> {
    this.stopped = true
    for (const off of this.offs) off()
    for (const t of this.timers) clearInterval(t)
    await this.ticking
  }

  // ---- raising

  /**
   * Writes the event of `crossing` for every webhook that asked for `type`, unless it was
   * written already (by any process); then sends what is due.
   */
  async raise (type: AlertEvent, crossing: string, data: Record<string, unknown>): Promise<void> {
    if (this.raised.has(crossing)) return
    const now = this.clock.now()
    const payload = JSON.stringify({ type, created_at: new Date(now).toISOString(), data })
    const rows: NewAlert[] = this.hooks.filter((h) => h.events.has(type))
      .map((h) => ({ id: `msg_${randomUUID().replace(/-/g, '')}`, crossing, webhook: h.url, type, payload, created_at: now }))
    this.raised.set(crossing, now)
    try {
      if (rows.length > 0 && await this.store.alerts.raise(rows) > 0) this.kick()
    } catch (err) {
      this.raised.delete(crossing)
      this.log.error({ err, crossing }, 'an alert could not be written')
    }
  }

  /** A budget's or a quota's window after a count: each threshold it reached, once per window. */
  private counted (c: QuotaCounted): void {
    const limit = c.limit.tokens ?? c.limit.costNano
    if (limit === undefined || limit <= 0) return
    const used = c.limit.tokens !== undefined ? c.total.tokens : c.total.cost_nano
    for (const threshold of this.config.thresholds) {
      if (used < threshold * limit) continue
      const crossing = `${c.kind === 'key' ? 'budget' : 'quota'}:${c.scope}:${c.window.start}:${threshold}`
      if (this.raised.has(crossing)) continue
      const resets = new Date(c.window.end).toISOString()
      if (c.kind === 'key') {
        void this.raise('budget.threshold', crossing, { scope: 'key', id: c.id, threshold, used_usd: nanoToUsd(used), limit_usd: nanoToUsd(limit), window_resets_at: resets })
      } else {
        const usd = c.limit.tokens === undefined
        void this.raise('quota.threshold', crossing, {
          scope: c.kind === 'organization' ? 'org' : 'project',
          id: c.id,
          threshold,
          used: usd ? nanoToUsd(used) : used,
          limit: usd ? nanoToUsd(limit) : limit,
          unit: usd ? 'usd' : 'tokens',
          window_resets_at: resets
        })
      }
    }
  }

  /** Balances under balance_low_usd, and keys whose expiry is near. */
  async scan (): Promise<void> {
    if (!this.enabled || this.stopped) return
    try {
      const now = this.clock.now()
      for (const [crossing, at] of this.raised) if (at < now - FORGET_MS) this.raised.delete(crossing)
      const low = this.config.balance_low_usd
      if (low !== undefined) {
        const floor = usdToNano(low)
        for (const org of await this.store.orgs.list()) {
          if (org.balance_nano >= floor) continue
          // one episode per top-up: balance + spent only grows with credits
          void this.raise('balance.low', `balance:${org.id}:${org.balance_nano + org.spent_nano}`, { org: org.id, balance_usd: nanoToUsd(org.balance_nano) })
        }
      }
      for (const key of await this.store.keys.list()) {
        if (key.revoked || key.expires_at === null || key.expires_at <= now) continue
        const notice = EXPIRY_NOTICES.find(([, ms]) => key.expires_at as number - now <= ms)
        if (notice === undefined) continue
        void this.raise('key.expiring', `key-expiring:${key.id}:${key.expires_at}:${notice[0]}`, { key_id: key.id, expires_at: new Date(key.expires_at).toISOString() })
      }
    } catch (err) {
      this.log.error({ err }, 'the alerts could not read balances and keys')
    }
  }

  /** A breaker opened (provider.down) or closed again (provider.up): raised once per change across processes. */
  private breaker (id: string, to: BreakerState, from: BreakerState, health: HealthBook): void {
    if (to === 'half_open' || this.stopped) return
    const state = to === 'open' ? 'down' : 'up'
    if (state === 'up' && from === 'closed') return
    const last = health.recentFailures(id)[0]
    const reason = state === 'down'
      ? `the breaker opened${last === undefined ? '' : ` after ${last.status === null ? last.error : `HTTP ${last.status}`}`}`
      : 'a call succeeded; the breaker closed'
    void (async () => {
      try {
        const episode = await this.store.alerts.transition(`provider:${id}`, state, 'up')
        if (episode !== null) await this.raise(state === 'down' ? 'provider.down' : 'provider.up', `provider:${id}:${episode}`, { provider: id, reason })
      } catch (err) {
        this.log.error({ err, provider: id }, 'a provider\'s change could not be recorded for the alerts')
      }
    })()
  }

  // ---- sending

  /** Sends what is due soon (after a raise), in a process that sends. */
  private kick (): void {
    if (this.stopped || !this.started) return
    setImmediate(() => { void this.tick() })
  }

  /** Claims the deliveries due now, sends them, records how each went; resolves when done. */
  async tick (): Promise<void> {
    if (this.ticking !== null) { this.again = true; return await this.ticking }
    this.ticking = (async () => {
      do {
        this.again = false
        const now = this.clock.now()
        let due: AlertDelivery[]
        try {
          due = await this.store.alerts.claim(now, now + CLAIM_MS, 20)
        } catch (err) {
          this.log.error({ err }, 'the alerts\' outbox could not be read')
          return
        }
        await Promise.all(due.map(async (d) => { await this.deliver(d) }))
        if (due.length === 20) this.again = true
      } while (this.again && !this.stopped)
    })().finally(() => { this.ticking = null })
    await this.ticking
  }

  private async deliver (d: AlertDelivery): Promise<void> {
    const hook = this.hooks.find((h) => h.url === d.webhook)
    const sent: Sent = hook === undefined ? { status: null, error: 'the webhook is no longer configured' } : await this.send(hook.signer, d)
    const now = this.clock.now()
    const ok = sent.status !== null && sent.status >= 200 && sent.status < 300
    const wait = BACKOFF_MS[Math.min(d.attempts, BACKOFF_MS.length) - 1] as number
    const next = now + wait
    const giveUp = !ok && (hook === undefined || next > d.created_at + RETRY_FOR_MS)
    try {
      await this.store.alerts.settle(d.id, {
        status: ok ? 'delivered' : giveUp ? 'failed' : 'pending',
        next_at: ok || giveUp ? now : next,
        last_status: sent.status,
        last_error: sent.error,
        delivered_at: ok ? now : null
      })
    } catch (err) {
      // the claim lapses and the delivery is tried again: at least once
      this.log.error({ err, id: d.id }, 'a webhook delivery\'s result could not be recorded')
    }
    if (!ok) this.log.warn({ id: d.id, webhook: d.webhook, status: sent.status, error: sent.error, attempt: d.attempts, gave_up: giveUp }, 'a webhook delivery failed')
  }

  /** One signed POST, to an address checked after resolving. */
  private async send (signer: Webhook, d: AlertDelivery): Promise<Sent> {
    const url = new URL(d.webhook)
    const at = new Date((this.opts.wallNow ?? Date.now)())
    let headers: Record<string, string>
    try {
      headers = {
        'content-type': 'application/json',
        'user-agent': 'modelgate-webhooks',
        'webhook-id': d.id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': signer.sign(d.id, at, d.payload)
      }
    } catch (err) {
      return { status: null, error: `not signed: ${(err as Error).message}` }
    }
    let address: string
    try {
      address = await webhookAddress(url, this.opts.lookup)
    } catch (err) {
      return { status: null, error: (err as Error).message }
    }
    // the connection goes to the address checked, whatever the name resolves to next
    const lookup: LookupFunction = (_host, options, cb) => {
      const family = address.includes(':') ? 6 : 4
      if ((options as { all?: boolean }).all === true) (cb as unknown as (e: null, a: Array<{ address: string, family: number }>) => void)(null, [{ address, family }])
      else cb(null, address, family)
    }
    return await new Promise<Sent>((resolve) => {
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method: 'POST', headers, lookup, timeout: SEND_TIMEOUT_MS }, (res: IncomingMessage) => {
        res.resume()
        res.on('end', () => { resolve({ status: res.statusCode ?? null, error: null }) })
        res.on('error', (err) => { resolve({ status: res.statusCode ?? null, error: err.message }) })
      })
      req.on('timeout', () => { req.destroy(new Error('timed out')) })
      req.on('error', (err: NodeJS.ErrnoException) => { resolve({ status: null, error: err.code ?? err.message }) })
      req.end(d.payload)
    })
  }
}
