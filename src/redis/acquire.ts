import { Lease } from '../limiters/lease.ts';
import type { Binding } from './binding.ts';
import type { Engine } from './engine.ts';
import { finish, LocalQueue, type RedisWaiter } from './waiting.ts';

// How often the head waiter asks again when nothing tells when a permit comes back (a concurrency permit held
// by another process); a release in this process wakes it at once.
const POLL_MS = 50;

/**
 * `acquire` over Redis: grant now if Redis says so; otherwise wait locally, bounded by `queueLimit` (permits)
 * and abortable, the waiter served next asking Redis again when a retry can succeed. Queue rules are the memory
 * store's within this process (oldest-first never overtakes a local waiter; newest-first evicts the oldest);
 * across processes nobody queues in Redis, so a waiter here competes with every other process's requests.
 */
export class Waiting {
  private readonly queues = new Map<string, LocalQueue>();

  constructor(private readonly engine: Engine) {}

  /** Permits waiting here for `binding`. */
  queued(binding: Binding): number {
    return this.queues.get(idOf(binding))?.permits ?? 0;
  }

  /** A permit of `key` came back in this process: the waiters on it ask again now. */
  wakeKey(key: string): void {
    for (const [id, queue] of this.queues) if (id.split('\n').includes(key)) queue.wake();
  }

  async acquire(binding: Binding, permits: number, signal: AbortSignal | undefined): Promise<Lease> {
    if (signal?.aborted) throw signal.reason;
    this.engine.check(binding, permits);
    const members = binding.members;
    if (members.every((m) => m.spec.options.queueLimit === 0)) {
      return (await this.engine.decide(binding, 't', permits, 'limit')).lease;
    }
    const id = idOf(binding);
    let queue = this.queues.get(id);
    let options = members[0].spec.options;
    const ahead = queue?.holds(binding.rank) === true && options.queueOrder === 'oldest-first';
    let last: Lease | undefined;
    if (!ahead) {
      const decided = await this.engine.decide(binding, 'w', permits, 'limit');
      if (decided.lease.granted || decided.local) return decided.lease;
      options = members[decided.blocked].spec.options;
      last = decided.lease;
    }
    if (signal?.aborted) throw signal.reason;
    queue = this.queues.get(id);
    const limit = options.queueLimit;
    const newestFirst = options.queueOrder === 'newest-first';
    const need = permits === 0 ? 1 : permits;
    const fits = need <= limit && (newestFirst || (queue?.permits ?? 0) + permits <= limit);
    if (!fits) {
      const reason = limit === 0 ? 'limit' : 'queue-full';
      return (await this.engine.decide(binding, 't', permits, reason, ahead)).lease;
    }
    if (!queue) {
      queue = new LocalQueue();
      this.queues.set(id, queue);
    }
    if (last) queue.last = last;
    while (queue.waiters.length > 0 && queue.permits + permits > limit) {
      const evicted = queue.waiters[0];
      queue.remove(evicted);
      finish(evicted);
      evicted.resolve(this.evictedLease(binding, queue));
    }
    const q = queue;
    return new Promise<Lease>((resolve, reject) => {
      const waiter: RedisWaiter = {
        permits,
        rank: binding.rank,
        resolve,
        reject,
        done: false,
        signal,
        onAbort: undefined,
      };
      if (signal) {
        waiter.onAbort = () => {
          if (waiter.done) return;
          q.remove(waiter);
          finish(waiter);
          reject(signal.reason);
          q.wake(); // the head of the line may have changed
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      q.push(waiter, newestFirst);
      // A waiter now first in line (the newest, newest-first; or of a higher class) asks at once.
      if (q.running && (newestFirst ? q.waiters[q.waiters.length - 1] : q.waiters[0]) === waiter) q.wake();
      this.pump(binding, id, q, newestFirst);
    });
  }

  /** Serves `queue` one waiter at a time, in order, asking Redis when a retry can succeed. */
  private async pump(binding: Binding, id: string, queue: LocalQueue, newestFirst: boolean): Promise<void> {
    if (queue.running) return;
    queue.running = true;
    try {
      while (queue.waiters.length > 0) {
        const waiter = newestFirst ? queue.waiters[queue.waiters.length - 1] : queue.waiters[0];
        let wait = POLL_MS;
        try {
          const asked = waiter.rank === binding.rank ? binding : { ...binding, rank: waiter.rank };
          const decided = await this.engine.decide(asked, 'w', waiter.permits, 'limit');
          if (waiter.done) {
            // Aborted or evicted while Redis decided: nobody takes the grant, so it is given back whole — a
            // concurrency permit by its release, a window's or bucket's (a cost estimate) by a refund.
            if (decided.lease.granted) giveBack(decided.lease);
            continue;
          }
          // A locked key answers its waiters at once, as in memory: waiting would not end the lock.
          if (decided.lease.granted || decided.local || decided.lease.reason === 'locked') {
            queue.remove(waiter);
            finish(waiter);
            waiter.resolve(decided.lease);
            continue;
          }
          queue.last = decided.lease;
          wait = decided.lease.retryAfterMs ?? POLL_MS;
        } catch (error) {
          queue.remove(waiter);
          finish(waiter);
          waiter.reject(error);
          continue;
        }
        await queue.sleep(wait);
      }
    } finally {
      queue.running = false;
      if (queue.waiters.length === 0 && this.queues.get(id) === queue) this.queues.delete(id);
    }
  }

  private evictedLease(binding: Binding, queue: LocalQueue): Lease {
    const m = binding.members[0];
    m.owner.rejected++;
    const last = queue.last;
    return Lease.rejected('evicted', {
      retryAfterMs: last?.retryAfterMs,
      limit: last?.limit ?? m.spec.algorithm.limit,
      remaining: 0,
      resetAfterMs: last?.resetAfterMs,
      source: last?.source ?? m.owner,
      key: m.partKey,
    });
  }
}

function idOf(binding: Binding): string {
  return binding.members.map((m) => m.key).join('\n');
}

/** Gives a grant nobody will use back: released (a concurrency lease) and refunded (a time-based one). */
function giveBack(lease: Lease): void {
  lease.release();
  lease.refund();
}
