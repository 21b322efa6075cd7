/**
 * The reference model of the lease operations (issue 26), before and beside the Lua: Redis's side of a take
 * (`l`) and a give-back (`g`) written over the memory algorithms themselves (`FixedWindow`, `SlidingWindow`),
 * which the Lua twins mirror statement for statement. The process side is the store's own `Batch`.
 */
import type { Algorithm } from '../../src/algorithms/algorithm.ts';

export type TakeReply =
  | { granted: true; permits: number; mark: string; endMs: number; resetMs: number; remaining: number }
  | { granted: false; retryMs: number };

/** One key's state in Redis and the two lease operations on it. */
export class LeaseModelStore {
  readonly s: Float64Array;
  started = false;
  /** The first window's start: windows and segments are aligned on it. */
  anchor = 0;
  /** The length of what a batch belongs to: the window (fixed) or one segment (sliding). */
  readonly segmentMs: number;

  constructor(readonly algorithm: Algorithm) {
    this.s = new Float64Array(algorithm.width);
    const [window, segments = 1] = algorithm.remote!.params;
    this.segmentMs = window / segments;
  }

  private at(now: number): void {
    if (!this.started) {
      this.algorithm.init(this.s, 0, now);
      this.started = true;
      this.anchor = now;
    }
    this.algorithm.advance(this.s, 0, now);
  }

  /** A take: up to `want` permits if `need` are available now, counted in the current window (segment). */
  take(now: number, want: number, need: number): TakeReply {
    const a = this.algorithm;
    this.at(now);
    const available = a.available(this.s, 0);
    if (available < need) return { granted: false, retryMs: a.retryAfter(this.s, 0, now, need) };
    const permits = Math.min(want, available);
    a.take(this.s, 0, permits);
    const mark = a.mark(this.s, 0);
    return {
      granted: true,
      permits,
      mark: String(mark),
      endMs: mark + this.segmentMs - now,
      resetMs: a.resetAfter(this.s, 0, now),
      remaining: Math.max(0, a.available(this.s, 0)),
    };
  }

  /** A give-back: `n` unspent permits into the window (segment) at `mark`, if it is still current (in the window). */
  giveBack(now: number, n: number, mark: string): void {
    this.at(now);
    this.algorithm.refund(this.s, 0, n, Number(mark));
  }

  /** Permits counted now (after advancing to `now`). */
  counted(now: number): number {
    this.at(now);
    return this.algorithm.limit - this.algorithm.available(this.s, 0);
  }
}

/**
 * Redis's side of a token bucket's lease ops (`lua/bucket-lease.ts`), over the memory `TokenBucket`: the bucket
 * and its holders' records (`extra` tokens a holder's batch may still hold, live until `expiry`). `reserve` is
 * the most all records may hold together (the Lua's is 1 % of the limit; the model takes any).
 */
export class BucketLeaseModel {
  readonly s: Float64Array;
  started = false;
  /** The bucket's first stamp: stepped refills land at it plus whole periods. */
  anchor = 0;
  readonly holders = new Map<string, { extra: number; expiry: number }>();

  constructor(
    readonly algorithm: Algorithm,
    readonly reserve: number,
    readonly holdMs: number,
  ) {
    this.s = new Float64Array(algorithm.width);
  }

  private at(now: number): void {
    if (!this.started) {
      this.algorithm.init(this.s, 0, now);
      this.started = true;
      this.anchor = now;
    }
    this.algorithm.advance(this.s, 0, now);
  }

  /** The others' live extras, and this holder's own (expired records dropped). */
  private records(now: number, id: string): { others: number; mine: number } {
    let others = 0;
    let mine = 0;
    for (const [h, r] of this.holders) {
      if (r.expiry <= now) this.holders.delete(h);
      else if (h === id) mine = r.extra;
      else others += r.extra;
    }
    return { others, mine };
  }

  /** Hands `back` tokens in (credited up to the holder's live record); then, for a take, grants a batch. */
  op(now: number, id: string, back: number, take?: { want: number; need: number }): TakeReply | undefined {
    const a = this.algorithm;
    const { others, mine: held } = this.records(now, id);
    this.at(now);
    const credited = Math.min(back, held);
    let mine = held - credited;
    if (credited > 0) a.refund(this.s, 0, credited, 0);
    let reply: TakeReply | undefined;
    if (take !== undefined) {
      mine = 0;
      const available = a.available(this.s, 0);
      if (available >= take.need) {
        const spare = Math.max(0, this.reserve - others);
        const n = Math.max(take.need, Math.min(take.want, available, take.need + spare));
        a.take(this.s, 0, n);
        mine = n - take.need;
        reply = {
          granted: true,
          permits: n,
          mark: '',
          endMs: this.holdMs,
          resetMs: a.resetAfter(this.s, 0, now),
          remaining: Math.max(0, a.available(this.s, 0)),
        };
      } else {
        reply = { granted: false, retryMs: a.retryAfter(this.s, 0, now, take.need) };
      }
    }
    if (mine > 0) this.holders.set(id, { extra: mine, expiry: now + this.holdMs });
    else this.holders.delete(id);
    return reply;
  }

  /** A strict refund (op `r`): the tokens back, never above the limit. */
  refund(now: number, n: number): void {
    this.at(now);
    this.algorithm.refund(this.s, 0, n, 0);
  }
}
