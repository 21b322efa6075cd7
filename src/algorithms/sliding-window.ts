import type { Algorithm, RemoteEncoding } from './algorithm.ts';

/**
 * `permitLimit` permits in any window of `window`, cut into `segments` segments. Permits taken in a segment come
 * back when that segment leaves the window: one full window after the segment began.
 * State: `[segmentStart, currentSlot, total, count_0 … count_{segments-1}]` (a ring of per-segment counts).
 */
export class SlidingWindow implements Algorithm {
  readonly kind = 'sliding-window';
  readonly width: number;
  readonly timeBased = true;
  readonly signature: string;
  readonly remote: RemoteEncoding;
  private readonly segmentMs: number;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    readonly segments: number,
  ) {
    this.width = 3 + segments;
    this.segmentMs = windowMs / segments;
    this.signature = `sw:${limit}:${windowMs}:${segments}`;
    this.remote = { twin: 'sw', params: [windowMs, segments] };
  }

  init(s: Float64Array, o: number, now: number): void {
    s.fill(0, o, o + this.width);
    s[o] = now;
  }

  advance(s: Float64Array, o: number, now: number): void {
    const start = s[o];
    if (now - start < this.segmentMs) return;
    const steps = Math.floor((now - start) / this.segmentMs);
    s[o] = start + steps * this.segmentMs;
    const segments = this.segments;
    if (steps >= segments) {
      s.fill(0, o + 1, o + this.width);
      return;
    }
    // Each step enters a new segment, whose ring slot held the segment that now leaves the window.
    let slot = s[o + 1];
    let total = s[o + 2];
    for (let i = 0; i < steps; i++) {
      slot = slot + 1 === segments ? 0 : slot + 1;
      total -= s[o + 3 + slot];
      s[o + 3 + slot] = 0;
    }
    s[o + 1] = slot;
    s[o + 2] = total;
  }

  available(s: Float64Array, o: number): number {
    return this.limit - s[o + 2];
  }

  take(s: Float64Array, o: number, n: number): void {
    s[o + 2] += n;
    s[o + 3 + s[o + 1]] += n;
  }

  give(s: Float64Array, o: number, n: number): void {
    s[o + 2] -= n;
    s[o + 3 + s[o + 1]] -= n;
  }

  mark(s: Float64Array, o: number): number {
    return s[o];
  }

  /** Segments are marked by their start: one segment apart. */
  get markStep(): number {
    return this.segmentMs;
  }

  refund(s: Float64Array, o: number, n: number, mark: number): void {
    // The segment the permits were taken in, if it is still in the window: k segments back from the current one.
    const k = Math.round((s[o] - mark) / this.segmentMs);
    if (k < 0 || k >= this.segments) return;
    const slot = (s[o + 1] - k + this.segments) % this.segments;
    const back = Math.min(n, s[o + 3 + slot]);
    if (!(back > 0)) return;
    s[o + 3 + slot] -= back;
    s[o + 2] -= back;
  }

  retryAfter(s: Float64Array, o: number, now: number, n: number): number {
    const need = n - (this.limit - s[o + 2]);
    if (need <= 0) return 0;
    // Walk from the oldest segment in the window; the k-th oldest leaves at segmentStart + (k + 1) segments.
    const segments = this.segments;
    let slot = s[o + 1];
    let freed = 0;
    for (let k = 0; k < segments; k++) {
      slot = slot + 1 === segments ? 0 : slot + 1;
      freed += s[o + 3 + slot];
      if (freed >= need) return s[o] + (k + 1) * this.segmentMs - now;
    }
    return s[o] + segments * this.segmentMs - now;
  }

  resetAfter(s: Float64Array, o: number, now: number): number {
    if (s[o + 2] <= 0) return 0;
    // All permits are back when the newest non-empty segment leaves.
    const segments = this.segments;
    let slot = s[o + 1];
    for (let k = segments - 1; k >= 0; k--) {
      if (s[o + 3 + slot] !== 0) return s[o] + (k + 1) * this.segmentMs - now;
      slot = slot === 0 ? segments - 1 : slot - 1;
    }
    return 0;
  }

  /** Counts stay: a lowered limit takes back nothing already granted. */
  retuned(): void {}

  isFull(s: Float64Array, o: number): boolean {
    return s[o + 2] <= 0;
  }
}
