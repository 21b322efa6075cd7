/**
 * A limiter written only against floodgate's public contract (`MemoryLimiterBase`, `SlotCore`, `Lease`), as a
 * user would write one: a total quota per key that never refills (a free trial of `quota` calls per user).
 * It knows nothing of floodgate's classes, and floodgate's HTTP layer and `chain` know nothing of it.
 */
import {
  Lease,
  type LimitShape,
  MemoryLimiterBase,
  type MemorySlot,
  type RejectionReason,
  type SlotCore,
} from '../../src/index.ts';

/** Each key's permits used so far, one slot per key. */
class QuotaCore implements SlotCore {
  readonly options = { clock: { now: () => 0 } }; // nothing here depends on time
  readonly algorithm: { readonly limit: number };
  readonly used: number[] = [];

  constructor(
    readonly quota: number,
    private readonly source: object,
  ) {
    this.algorithm = { limit: quota };
  }

  canGrant(slot: number, permits: number): boolean {
    return this.used[slot] + (permits === 0 ? 1 : permits) <= this.quota;
  }

  commit(slot: number, permits: number, _now: number, _refundable?: boolean, key?: string): Lease {
    this.used[slot] += permits;
    return Lease.granted({
      limit: this.quota,
      remaining: this.quota - this.used[slot],
      source: this.source,
      key,
    });
  }

  reject(
    slot: number,
    _permits: number,
    _now: number,
    reason: RejectionReason,
    _rank?: number,
    key?: string,
  ): Lease {
    const remaining = Math.max(0, this.quota - this.used[slot]);
    return Lease.rejected(reason, { limit: this.quota, remaining, source: this.source, key });
  }
}

/** `quota` requests per key, ever. */
export class TotalQuota<R> extends MemoryLimiterBase {
  readonly shape: LimitShape;
  readonly mayQueue = false;
  readonly keyOf: (resource: R) => string;
  readonly #core: QuotaCore;
  readonly #slots = new Map<string, number>();

  constructor(options: { quota: number; key: (resource: R) => string }) {
    super();
    this.keyOf = options.key;
    this.#core = new QuotaCore(options.quota, this);
    this.shape = { limit: options.quota, windowMs: undefined, timeBased: true };
  }

  shapeFor(_key: string): LimitShape {
    return this.shape;
  }

  bind(key: string | undefined): MemorySlot {
    const k = key ?? '';
    let slot = this.#slots.get(k);
    if (slot === undefined) {
      slot = this.#core.used.push(0) - 1;
      this.#slots.set(k, slot);
    }
    return { core: this.#core, slot, key };
  }

  available(key: string | undefined): number {
    const slot = this.#slots.get(key ?? '');
    return slot === undefined ? this.#core.quota : this.#core.quota - this.#core.used[slot];
  }

  /** Decides now for `resource`'s key. */
  tryAcquire(resource: R, permits = 1): Lease {
    return this.tryAcquireFor(this.keyOf(resource), permits);
  }
}
