/** A request waiting for permits. */
export interface Waiter {
  /** Permits it waits for where it is queued (a chain's waiter asks each member for what that member counts). */
  permits: number;
  readonly enqueuedAt: number;
  /** Its class: a higher rank is served first (`'default'` is 1). Set before it is queued. */
  rank: number;
  prev: Waiter | undefined;
  next: Waiter | undefined;
  /** The queue it waits in now, or undefined once it has left. */
  queue: WaitQueue | undefined;
}

/** The waiters of one class in a queue that holds several: a stretch of the list. */
interface Run<W> {
  readonly rank: number;
  first: W;
  last: W;
  permits: number;
}

/**
 * The waiters of one partition: a doubly linked list, so an aborted waiter leaves in O(1), ordered by class
 * (highest first) and, within a class, by arrival. While every waiter is of one class (the usual case, and the
 * only one for limiters asked without a priority) it is a plain FIFO list and costs what it always did; a second
 * class adds one {@link Run} per class present, so finding where a class starts or ends is O(classes), never
 * O(waiters). `permits` is what `queueLimit` is measured against.
 */
export class WaitQueue<W extends Waiter = Waiter> {
  head: W | undefined;
  tail: W | undefined;
  permits = 0;
  count = 0;
  /** The classes present, highest first, when there are several; undefined while there is one. */
  private runs: Run<W>[] | undefined;

  constructor(
    readonly slot: number,
    /** Whoever serves this queue (a waiter of a chain moves between owners). */
    readonly owner: object,
  ) {}

  /** Queues `w` behind every waiter of its class and above, ahead of every lower class. */
  push(w: W): void {
    w.queue = this;
    this.permits += w.permits;
    this.count++;
    const tail = this.tail;
    if (tail === undefined) {
      w.prev = w.next = undefined;
      this.head = this.tail = w;
      return;
    }
    if (this.runs === undefined && tail.rank === w.rank) {
      this.link(w, tail);
      return;
    }
    this.pushClass(w);
  }

  remove(w: W): void {
    if (w.queue !== this) return;
    if (this.runs !== undefined) this.leaveRun(w);
    if (w.prev) w.prev.next = w.next;
    else this.head = w.next as W | undefined;
    if (w.next) w.next.prev = w.prev;
    else this.tail = w.prev as W | undefined;
    w.prev = w.next = w.queue = undefined;
    this.permits -= w.permits;
    this.count--;
  }

  /** The class served first: the highest present (undefined when empty). */
  get topRank(): number | undefined {
    return this.head?.rank;
  }

  /** The newest waiter of the highest class (what newest-first serves). */
  newest(): W | undefined {
    return this.runs === undefined ? this.tail : this.runs[0].last;
  }

  /** The oldest waiter of the lowest class (what a full queue evicts first). */
  lowest(): W | undefined {
    const runs = this.runs;
    return runs === undefined ? this.head : runs[runs.length - 1].first;
  }

  /** Permits waiting in classes below `rank`, and in `rank` itself when `own` (what may be evicted for it). */
  permitsBelow(rank: number, own: boolean): number {
    const runs = this.runs;
    if (runs === undefined) {
      const r = this.head?.rank;
      return r !== undefined && (r < rank || (own && r === rank)) ? this.permits : 0;
    }
    let total = 0;
    for (let i = runs.length - 1; i >= 0 && runs[i].rank <= rank; i--) {
      if (runs[i].rank < rank || own) total += runs[i].permits;
    }
    return total;
  }

  /** Calls `each` with the oldest waiter of every class present, highest class first. */
  firstOfEachClass(each: (first: W) => void): void {
    const runs = this.runs;
    if (runs === undefined) {
      if (this.head !== undefined) each(this.head);
      return;
    }
    // `each` may remove waiters (and so runs): walk a copy of the firsts.
    const firsts = runs.map((run) => run.first);
    for (const first of firsts) if (first.queue === this) each(first);
  }

  /** Links `w` right after `after`. */
  private link(w: W, after: W): void {
    w.prev = after;
    w.next = after.next;
    if (after.next) after.next.prev = w;
    else this.tail = w;
    after.next = w;
  }

  private pushClass(w: W): void {
    let runs = this.runs;
    if (runs === undefined) {
      // A second class arrives: the single one becomes the first run.
      const only = this.head!;
      runs = [{ rank: only.rank, first: only, last: this.tail!, permits: this.permits - w.permits }];
      this.runs = runs;
    }
    let i = 0;
    while (i < runs.length && runs[i].rank > w.rank) i++;
    const run = runs[i];
    if (run !== undefined && run.rank === w.rank) {
      this.link(w, run.last);
      run.last = w;
      run.permits += w.permits;
      return;
    }
    runs.splice(i, 0, { rank: w.rank, first: w, last: w, permits: w.permits });
    if (i > 0) {
      this.link(w, runs[i - 1].last);
      return;
    }
    // The highest class so far: at the front.
    const head = this.head!;
    w.prev = undefined;
    w.next = head;
    head.prev = w;
    this.head = w;
  }

  private leaveRun(w: W): void {
    const runs = this.runs!;
    let i = 0;
    while (runs[i].rank !== w.rank) i++;
    const run = runs[i];
    run.permits -= w.permits;
    if (run.first === w && run.last === w) {
      runs.splice(i, 1);
      if (runs.length === 1) this.runs = undefined;
      return;
    }
    if (run.first === w) run.first = w.next as W;
    else if (run.last === w) run.last = w.prev as W;
  }
}
