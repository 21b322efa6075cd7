/** A request waiting for permits. */
export interface Waiter {
  readonly permits: number;
  readonly enqueuedAt: number;
  prev: Waiter | undefined;
  next: Waiter | undefined;
  /** The queue it waits in now, or undefined once it has left. */
  queue: WaitQueue | undefined;
}

/**
 * A doubly linked list of waiters for one partition, so an aborted waiter leaves in O(1). `permits` is what
 * `queueLimit` is measured against.
 */
export class WaitQueue<W extends Waiter = Waiter> {
  head: W | undefined;
  tail: W | undefined;
  permits = 0;
  count = 0;

  constructor(
    readonly slot: number,
    /** Whoever serves this queue (a waiter of a chain moves between owners). */
    readonly owner: object,
  ) {}

  push(w: W): void {
    w.queue = this;
    w.prev = this.tail;
    w.next = undefined;
    if (this.tail) this.tail.next = w;
    else this.head = w;
    this.tail = w;
    this.permits += w.permits;
    this.count++;
  }

  remove(w: W): void {
    if (w.queue !== this) return;
    if (w.prev) w.prev.next = w.next;
    else this.head = w.next as W | undefined;
    if (w.next) w.next.prev = w.prev;
    else this.tail = w.prev as W | undefined;
    w.prev = w.next = w.queue = undefined;
    this.permits -= w.permits;
    this.count--;
  }
}
