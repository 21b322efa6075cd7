/**
 * A small, obviously-correct reference model of behaviour.md §1: capacity computed from a log of grants (no
 * lazily advanced state), and the queue rules written out plainly. Property tests compare floodgate with it.
 */

export type ModelKind =
  | { kind: 'fixed'; limit: number; window: number }
  | { kind: 'sliding'; limit: number; window: number; segments: number }
  | { kind: 'stepped'; limit: number; perPeriod: number; period: number }
  | { kind: 'continuous'; limit: number; perPeriod: number; period: number }
  | { kind: 'concurrency'; limit: number };

interface Grant {
  t: number;
  n: number;
}

/** Permits available at `t` given every grant so far (and concurrency permits held). */
export class Capacity {
  readonly grants: Grant[] = [];
  held = 0;
  constructor(
    readonly spec: ModelKind,
    readonly origin: number,
  ) {}

  available(t: number): number {
    const spec = this.spec;
    const rel = t - this.origin;
    switch (spec.kind) {
      case 'fixed': {
        const w = Math.floor(rel / spec.window);
        return spec.limit - this.recent((g) => Math.floor((g.t - this.origin) / spec.window) === w);
      }
      case 'sliding': {
        const seg = spec.window / spec.segments;
        const cur = Math.floor(rel / seg);
        return spec.limit - this.recent((g) => Math.floor((g.t - this.origin) / seg) > cur - spec.segments);
      }
      case 'stepped': {
        // Replay period by period from the start: tokens after each boundary, minus grants in between.
        let tokens = spec.limit;
        let boundary = 0;
        let i = 0;
        const periods = Math.floor(rel / spec.period);
        for (;;) {
          while (
            i < this.grants.length &&
            Math.floor((this.grants[i].t - this.origin) / spec.period) === boundary
          ) {
            tokens -= this.grants[i++].n;
          }
          if (boundary === periods) break;
          // Skip idle stretches: with no grant before the next one's period, tokens just fill up.
          const nextGrant =
            i < this.grants.length ? Math.floor((this.grants[i].t - this.origin) / spec.period) : periods;
          const jump = Math.max(1, Math.min(nextGrant, periods) - boundary);
          tokens = Math.min(spec.limit, tokens + jump * spec.perPeriod);
          boundary += jump;
        }
        return tokens;
      }
      case 'continuous': {
        // Exact integer arithmetic in units of 1 / period tokens.
        let units = spec.limit * spec.period;
        let last = this.origin;
        for (const g of this.grants) {
          units = Math.min(spec.limit * spec.period, units + (g.t - last) * spec.perPeriod);
          units -= g.n * spec.period;
          last = g.t;
        }
        units = Math.min(spec.limit * spec.period, units + (t - last) * spec.perPeriod);
        return Math.floor(units / spec.period);
      }
      case 'concurrency':
        return spec.limit - this.held;
    }
  }

  take(t: number, n: number): void {
    if (this.spec.kind === 'concurrency') this.held += n;
    else if (n > 0) this.grants.push({ t, n });
  }

  /** Sums the newest grants while `inWindow` holds (grants are in time order). */
  private recent(inWindow: (g: Grant) => boolean): number {
    let total = 0;
    for (let i = this.grants.length - 1; i >= 0 && inWindow(this.grants[i]); i--) total += this.grants[i].n;
    return total;
  }
}

export interface ModelWaiter {
  id: number;
  n: number;
}

/** The queue rules of behaviour.md §1 over a {@link Capacity}. */
export class ModelLimiter {
  readonly queue: ModelWaiter[] = [];
  readonly outcome = new Map<number, string>();

  constructor(
    readonly capacity: Capacity,
    readonly queueLimit: number,
    readonly newestFirst: boolean,
  ) {}

  private queued(): number {
    return this.queue.reduce((a, w) => a + w.n, 0);
  }

  private fits(t: number, n: number): boolean {
    return this.capacity.available(t) >= Math.max(1, n);
  }

  tryAcquire(t: number, id: number, n: number): boolean {
    const ok = this.fits(t, n) && (n === 0 || this.newestFirst || this.queue.length === 0);
    if (ok) this.capacity.take(t, n);
    this.outcome.set(id, ok ? 'granted' : 'rejected');
    return ok;
  }

  acquire(t: number, id: number, n: number): void {
    if (this.tryAcquire(t, id, n)) return;
    this.outcome.delete(id);
    if (Math.max(1, n) > this.queueLimit) {
      this.outcome.set(id, 'rejected');
      return;
    }
    if (this.queued() + n > this.queueLimit) {
      if (!this.newestFirst) {
        this.outcome.set(id, 'rejected');
        return;
      }
      while (this.queue.length > 0 && this.queued() + n > this.queueLimit) {
        this.outcome.set(this.queue.shift()!.id, 'evicted');
      }
    }
    this.queue.push({ id, n });
    this.outcome.set(id, 'waiting');
  }

  abort(t: number, id: number): void {
    const i = this.queue.findIndex((w) => w.id === id);
    if (i < 0) return;
    this.queue.splice(i, 1);
    this.outcome.set(id, 'aborted');
    this.serve(t);
  }

  release(t: number, n: number): void {
    this.capacity.held -= n;
    this.serve(t);
  }

  serve(t: number): void {
    while (this.queue.length > 0) {
      const w = this.newestFirst ? this.queue[this.queue.length - 1] : this.queue[0];
      if (!this.fits(t, w.n)) return;
      this.queue.splice(this.newestFirst ? this.queue.length - 1 : 0, 1);
      this.capacity.take(t, w.n);
      this.outcome.set(w.id, 'granted');
    }
  }
}
