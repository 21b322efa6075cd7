/**
 * Two counts over the last `windowMs`, kept in `buckets` slots of `windowMs / buckets` each: a call's count
 * leaves the window between `windowMs − windowMs / buckets` and `windowMs` after it was added. Time is read
 * only when the counts are touched (no timer): moving on clears the slots that went out of the window, so an
 * idle history costs nothing and one left alone for longer than the window reads as empty.
 *
 * The throttler counts requests and accepts in one; the retry budget counts calls and retries in another.
 */
export class SlidingCounts {
  private readonly totals: Float64Array;
  private readonly marks: Float64Array;
  private readonly slotMs: number;
  private head = 0;
  private headStart: number;
  private totalSum = 0;
  private markSum = 0;

  constructor(windowMs: number, buckets: number, now: number) {
    this.totals = new Float64Array(buckets);
    this.marks = new Float64Array(buckets);
    this.slotMs = windowMs / buckets;
    this.headStart = now;
  }

  /** Adds `total` and `marked` (requests and accepts, calls and retries) at `now`. */
  add(now: number, total: number, marked: number): void {
    this.advance(now);
    this.totals[this.head] += total;
    this.marks[this.head] += marked;
    this.totalSum += total;
    this.markSum += marked;
  }

  /** The first count over the window ending at `now`. */
  total(now: number): number {
    this.advance(now);
    return this.totalSum;
  }

  /** The second count over the window ending at `now`. */
  marked(now: number): number {
    this.advance(now);
    return this.markSum;
  }

  /** Whether nothing is left in the window ending at `now`. */
  empty(now: number): boolean {
    this.advance(now);
    return this.totalSum === 0 && this.markSum === 0;
  }

  private advance(now: number): void {
    // A clock that steps back (it should not: the clock is monotonic) keeps counting in the current slot.
    const steps = Math.floor((now - this.headStart) / this.slotMs);
    if (steps <= 0) return;
    const slots = this.totals.length;
    if (steps >= slots) {
      this.totals.fill(0);
      this.marks.fill(0);
      this.totalSum = 0;
      this.markSum = 0;
      this.head = 0;
    } else {
      for (let i = 0; i < steps; i++) {
        this.head = (this.head + 1) % slots;
        this.totalSum -= this.totals[this.head];
        this.markSum -= this.marks[this.head];
        this.totals[this.head] = 0;
        this.marks[this.head] = 0;
      }
    }
    this.headStart += steps * this.slotMs;
  }
}
