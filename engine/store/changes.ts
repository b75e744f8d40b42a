import type { ChangeListener, PeerBus, TenancyChange } from './types.js'

const TOPIC = 'tenancy'

/**
 * The tenancy changes a process hears: its own, told to its listeners at once, and the other
 * processes' on the store's bus (the workers of one `serve`, or the instances on one Redis). A
 * change is published once it is committed, and `publish` resolves when this process's listeners
 * and every process on the bus have handled it (or after the bus's bounded wait): an admin answer
 * comes after every cache that could hold the old state dropped it.
 */
export class ChangeFeed {
  private readonly listeners = new Set<ChangeListener>()

  constructor (private readonly bus: PeerBus | null, private readonly onError: (err: unknown, what: string) => void) {
    bus?.on(TOPIC, async (change) => { await this.deliver(change) })
  }

  on (fn: ChangeListener): () => void {
    this.listeners.add(fn)
    return () => { this.listeners.delete(fn) }
  }

  get size (): number { return this.listeners.size }

  /** Runs this process's listeners; resolves once each has (a failing one is reported). */
  async deliver (change: TenancyChange): Promise<void> {
    await Promise.all([...this.listeners].map(async (fn) => {
      try { await fn(change) } catch (err) { this.onError(err, 'a listener of tenancy changes failed') }
    }))
  }

  /** This process's listeners, and every process on the bus. */
  async publish (change: TenancyChange): Promise<void> {
    const others = this.bus?.broadcast(TOPIC, change).catch((err: unknown) => { this.onError(err, 'a tenancy change could not be told to the other processes') })
    await Promise.all([this.deliver(change), others])
  }
}
