/**
 * Deadlines of requests in flight, one sorted list per duration, each with a single timer.
 *
 * Why not a `setTimeout` per request: almost every request finishes in time, so the cost that matters is
 * adding and removing a deadline. Here both are O(1) pointer updates on the request's own context (no
 * allocation), and a list's timer is re-armed only when it fires, about once per duration, instead of once per
 * request. Requests with the same duration arrive in deadline order, so insertion is an append; the rare
 * request whose deadline moves back (a route setting applied after the app-level middleware) walks back from
 * the tail past the few requests that started after it.
 */

/** What a list links: a request's context carries these fields itself. */
export interface DeadlineEntry {
  /** When the entry falls due, in `performance.now()` milliseconds. */
  due: number;
  prevInList: DeadlineEntry | null;
  nextInList: DeadlineEntry | null;
  list: DeadlineList | null;
}

/** Timers fire on the event loop's millisecond clock; allow for its rounding against `performance.now()`. */
const SLACK_MS = 1;

export class DeadlineList {
  head: DeadlineEntry | null = null;
  tail: DeadlineEntry | null = null;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  readonly #onExpired: (expired: DeadlineEntry[]) => void;

  constructor(onExpired: (expired: DeadlineEntry[]) => void) {
    this.#onExpired = onExpired;
  }

  add(entry: DeadlineEntry): void {
    let after = this.tail;
    while (after !== null && after.due > entry.due) after = after.prevInList;
    entry.list = this;
    entry.prevInList = after;
    entry.nextInList = after === null ? this.head : after.nextInList;
    if (entry.nextInList === null) this.tail = entry;
    else entry.nextInList.prevInList = entry;
    if (after === null) this.head = entry;
    else after.nextInList = entry;
    // The timer only ever needs to move earlier; a later head is handled when the timer fires.
    if (entry.due < this.#timerAt) this.#arm(entry.due);
  }

  remove(entry: DeadlineEntry): void {
    if (entry.list !== this) return;
    if (entry.prevInList === null) this.head = entry.nextInList;
    else entry.prevInList.nextInList = entry.nextInList;
    if (entry.nextInList === null) this.tail = entry.prevInList;
    else entry.nextInList.prevInList = entry.prevInList;
    entry.prevInList = entry.nextInList = null;
    entry.list = null;
    // The timer is left armed: when it fires it finds nothing due and re-arms for the new head (or stops).
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(this.#fire, Math.max(1, Math.ceil(at - performance.now())));
    // A pending deadline must not keep a process alive that has nothing else to do.
    this.#timer.unref();
  }

  #fire = (): void => {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now() + SLACK_MS;
    const expired: DeadlineEntry[] = [];
    while (this.head !== null && this.head.due <= now) {
      const entry = this.head;
      this.remove(entry);
      expired.push(entry);
    }
    if (this.head !== null) this.#arm(this.head.due);
    if (expired.length > 0) this.#onExpired(expired);
  };
}
