/**
 * When a key of a `leases: 'auto'` limiter is decided from batches (hot) and when exactly, one call per decision
 * (cold). Measured defaults: see docs/redis.md (Automatic leases).
 *
 * Why a threshold at all: a batch is sized to about `BATCH_TARGET_MS` of this process's demand, so below a few
 * tens of decisions per second it is one permit and a take costs Redis what an exact decision costs, while an
 * exact decision keeps what leases give up (`remaining` is the fleet's to the permit, a rejection is Redis's own
 * answer, nothing is stranded by a crash). Above the threshold a batch holds many permits and a take is paid for
 * by many local decisions.
 */

/** A key is promoted when this process decides it at least this many times in one interval. */
export const PROMOTE_COUNT = 10;
/** The counting interval: `PROMOTE_COUNT` per `INTERVAL_MS` is 100 decisions per second. */
export const INTERVAL_MS = 100;
/** A hot key is demoted after this long below a quarter of the promotion rate (hysteresis). */
export const DEMOTE_AFTER_MS = 2000;
/** Cold keys counted per interval at most; beyond, new keys stay cold until the next interval. */
const MAX_COUNTED = 10_000;
/** Hot keys at most (the leases' own bound); beyond, new keys stay cold. */
const MAX_HOT = 10_000;

interface Hot {
  /** Decisions in the current interval. */
  count: number;
  /** Milliseconds spent below the demotion rate so far. */
  coolMs: number;
}

/**
 * Per key, whether its decisions go to leases: counts each key's decisions per `INTERVAL_MS` on the store's
 * clock, promotes a key at `PROMOTE_COUNT` in one interval and demotes it (calling `demote`) once it has stayed
 * below a quarter of that for `DEMOTE_AFTER_MS`. Memory is bounded (`MAX_COUNTED` cold keys an interval,
 * `MAX_HOT` hot ones); time is one clock read and one or two map operations per decision, and a sweep over the
 * hot keys per interval.
 */
export class LeasePolicy {
  private counts = new Map<string, number>();
  private readonly hot = new Map<string, Hot>();
  private intervalStart = 0;
  private intervalEnd = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly clock: () => number,
    /** The key went cold: its batch is given back. False when it cannot be now (a take in flight): it stays hot. */
    private readonly demote: (key: string) => boolean,
  ) {}

  /** Counts a decision on `key` and says whether it is decided from leases. */
  leased(key: string): boolean {
    const now = this.clock();
    // (A test clock may also move back: counting starts afresh then too.)
    if (now >= this.intervalEnd || now < this.intervalStart) this.roll(now);
    const h = this.hot.get(key);
    if (h !== undefined) {
      h.count++;
      return true;
    }
    const n = (this.counts.get(key) ?? 0) + 1;
    if (n >= PROMOTE_COUNT && this.hot.size < MAX_HOT) {
      this.counts.delete(key);
      this.hot.set(key, { count: n, coolMs: 0 });
      return true;
    }
    if (n > 1 || this.counts.size < MAX_COUNTED) this.counts.set(key, n);
    return false;
  }

  /** Whether `key` is hot now (for tests and statistics; counts nothing). */
  isHot(key: string): boolean {
    return this.hot.has(key);
  }

  /** The interval ended: demote the keys that stayed cool long enough, and start counting afresh. */
  private roll(now: number): void {
    // Since the interval began: longer than one when no decision came for a while (all of it cool).
    const elapsed = this.intervalEnd === Number.NEGATIVE_INFINITY ? 0 : Math.max(0, now - this.intervalStart);
    for (const [key, h] of this.hot) {
      // Below a quarter of the promotion rate over the intervals that passed.
      if (h.count * 4 * INTERVAL_MS < PROMOTE_COUNT * elapsed) {
        h.coolMs += elapsed;
        if (h.coolMs >= DEMOTE_AFTER_MS && this.demote(key)) {
          this.hot.delete(key);
          continue;
        }
      } else {
        h.coolMs = 0;
      }
      h.count = 0;
    }
    // A new map rather than clear(): a cleared map keeps its old table reachable from the new one.
    if (this.counts.size > 0) this.counts = new Map();
    this.intervalStart = now;
    this.intervalEnd = now + INTERVAL_MS;
  }
}
