import { randomBytes } from 'node:crypto'
import { BUS_WAIT_MS, Topics } from '../bus.js'
import type { BusTopic, BusTopics, PeerBus } from '../types.js'
import type { MaybePromise } from '../../kernel/maybe-promise.js'
import type { Connection } from './db.js'

interface Envelope { from: string, id: string, topic: string, message: unknown }

const isEnvelope = (v: unknown): v is Envelope => {
  const e = v as Envelope | null
  return typeof e?.from === 'string' && typeof e.id === 'string' && typeof e.topic === 'string'
}

/**
 * The instances' bus, on Redis pub/sub under the store's prefix: a message is published on
 * `bus`; every other instance handles it and answers on the sender's own `bus-ack:<holder>`
 * channel. PUBLISH says how many subscribers received it; the sender waits for that many
 * answers, itself excepted, or BUS_WAIT_MS.
 */
export class RedisBus implements PeerBus {
  private readonly topics = new Topics()
  private readonly waiting = new Map<string, { acks: number, expected: number, done: () => void }>()

  constructor (private readonly conn: Connection, private readonly self: string, private readonly onError: (err: unknown, what: string) => void) {
    conn.listen(conn.key('bus'), (text) => { this.receive(text) })
    conn.listen(conn.key('bus-ack', self), (id) => {
      const w = this.waiting.get(id)
      if (w === undefined) return
      w.acks++
      if (w.acks >= w.expected) w.done()
    })
  }

  on<T extends BusTopic> (topic: T, fn: (message: BusTopics[T]) => MaybePromise<void>): void { this.topics.on(topic, fn) }

  async broadcast<T extends BusTopic> (topic: T, message: BusTopics[T]): Promise<void> {
    const id = randomBytes(8).toString('hex')
    let timer: NodeJS.Timeout | undefined
    const answered = new Promise<void>((resolve) => {
      // answers may come back before PUBLISH does: counted from now, judged once `expected` is known
      this.waiting.set(id, { acks: 0, expected: Number.POSITIVE_INFINITY, done: resolve })
      timer = setTimeout(resolve, BUS_WAIT_MS)
    })
    try {
      const receivers = await this.conn.r(async (redis) => await redis.publish(this.conn.key('bus'), JSON.stringify({ from: this.self, id, topic, message } satisfies Envelope)))
      const w = this.waiting.get(id)
      if (w !== undefined) {
        w.expected = receivers - 1
        if (w.acks >= w.expected) w.done()
      }
      await answered
    } finally {
      clearTimeout(timer)
      this.waiting.delete(id)
    }
  }

  private receive (text: string): void {
    let e: unknown
    try { e = JSON.parse(text) } catch { return }
    if (!isEnvelope(e) || e.from === this.self) return
    const { from, id } = e
    void this.topics.deliver(e.topic, e.message, (err) => { this.onError(err, 'a message from another instance failed') })
      .then(async () => { await this.conn.redis.publish(this.conn.key('bus-ack', from), id) })
      .catch((err: unknown) => { this.onError(err, 'a message from another instance could not be answered') })
  }
}
