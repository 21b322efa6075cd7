import type { ScriptRunner } from './client.ts';
import { DECIDE_SCRIPT } from './script.ts';
import { keySlot } from './slot.ts';

/** The store did not answer a decision in time, or failed: the caller applies `onUnavailable`. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/**
 * One request for the decision script, and where its answer goes. It writes its keys and arguments straight
 * into the call's (no arrays of its own: a decision allocates little, so the collector pauses it rarely).
 */
export interface Request {
  /** Its first key: the Cluster slot of all of them. */
  readonly key: string;
  /** Appends one key per member. */
  keysTo(out: string[]): void;
  /** Appends the request's encoded arguments (`encodeRequest`). */
  argsTo(out: string[]): void;
  /** The script's answer to this request: its fields separated by ','. Must not throw. */
  answer(reply: string): void;
  /** Redis failed or missed the deadline. Must not throw. */
  fail(error: StoreUnavailableError): void;
}

/** A script call in flight. */
interface Call {
  /** Emptied when settled: an answered call must not keep its decisions (and their leases) alive. */
  requests: Request[];
  /** `performance.now()` past which its requests fail. */
  readonly deadline: number;
  settled: boolean;
}

// A bigger batch holds Redis longer; past this the gain per request is small.
const MAX_BATCH = 128;
// Below this a batch is not split early: a call's own cost would outweigh the overlap.
const MIN_SPLIT = 16;
const NONE: Request[] = [];
// What an emptied slot of the calls in flight holds: one object, so the array keeps one element kind.
const SETTLED: Call = { requests: NONE, deadline: 0, settled: true };

/**
 * Sends decisions to Redis with a deadline of its own per call (independent of the client's timeouts or its
 * offline queue) and, when `coalesce` is on, gathers the decisions issued in the same tick into one script call
 * per slot (per node without Cluster): one round trip for many decisions, in the order they were asked.
 *
 * Deadlines are kept by one timer for all calls, not one per call: every call has the same `timeoutMs`, so the
 * calls in flight are in deadline order and the timer only ever waits for the oldest one.
 */
export class Dispatcher {
  /**
   * The group gathering per slot. Entries are replaced, never deleted or cleared: `Map#clear` (and the rehash a
   * delete can cause) leaves the old table linked to its successor with its entries in it, so once one table was
   * promoted every later one, with the decisions of its groups, survived each young collection (coalesced:
   * 1.6–3 MB copied per scavenge, 6–9 ms pauses, and a p99 of 7–12 ms at 64 in flight).
   */
  private readonly groups = new Map<number, Request[]>();
  /** Slots whose group gathered something this tick (a slot may appear twice: its group is then empty). */
  private pending: number[] = [];
  private scheduled = false;
  /**
   * Calls in flight from `head` on, oldest (first deadline) first; answered ones leave when they reach the head.
   * An array, not a Set: a Set added to and deleted from at every call tripled this process's young-generation
   * collection time, and with it the decisions' p99 (measured: 7–9.5 ms against 3–5.5 ms at 64 in flight).
   */
  private queue: Call[] = [];
  private head = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Requests sent and not answered yet. */
  private outstanding = 0;

  constructor(
    private readonly runner: ScriptRunner,
    private readonly timeoutMs: number,
    private readonly coalesce: boolean,
  ) {}

  /** Sends `request`: now without coalescing, else with the other requests of this tick (per slot). */
  send(request: Request): void {
    // With nothing in flight and nothing gathered, waiting for the tick's end only delays this decision: go now,
    // and the ones issued after it in this tick gather behind it (one decision at a time is never held back).
    if (!this.coalesce || (this.outstanding === 0 && !this.scheduled)) {
      this.call([request]);
      return;
    }
    const slot = this.runner.cluster ? keySlot(request.key) : 0;
    let group = this.groups.get(slot);
    if (group === undefined) {
      group = [];
      this.groups.set(slot, group);
    }
    if (group.length === 0) this.pending.push(slot);
    group.push(request);
    // A group as large as what Redis is deciding now goes at once rather than at the end of the tick: Redis
    // decides it while this process answers the rest and gathers the next batch. One batch for everything in
    // flight leaves one side idle while the other works (this process was idle 44 % of the time at 64 in
    // flight).
    if (group.length >= MAX_BATCH || (group.length >= MIN_SPLIT && group.length >= this.outstanding)) {
      this.groups.set(slot, []);
      this.call(group);
    } else if (!this.scheduled) {
      this.scheduled = true;
      // After the promise reactions of this tick: decisions issued by them join the batch too.
      process.nextTick(() => this.flush());
    }
  }

  /** Runs one request and resolves with its answer (rejects with StoreUnavailableError). */
  request(keys: readonly string[], args: readonly string[]): Promise<string> {
    return new Promise((resolve, reject) =>
      this.send({
        key: keys[0],
        keysTo: (out) => out.push(...keys),
        argsTo: (out) => out.push(...args),
        answer: resolve,
        fail: reject,
      }),
    );
  }

  private flush(): void {
    this.scheduled = false;
    const pending = this.pending;
    this.pending = [];
    for (const slot of pending) {
      const group = this.groups.get(slot)!;
      if (group.length === 0) continue;
      this.groups.set(slot, []);
      this.call(group);
    }
  }

  private call(requests: Request[]): void {
    // KEYS, then ARGV: the number of requests and each request's arguments, built in one array.
    const argv: string[] = [];
    for (const r of requests) r.keysTo(argv);
    const numKeys = argv.length;
    argv.push(String(requests.length));
    for (const r of requests) r.argsTo(argv);
    const call: Call = { requests, deadline: performance.now() + this.timeoutMs, settled: false };
    this.queue.push(call);
    this.outstanding += requests.length;
    this.timer ??= setTimeout(this.sweep, this.timeoutMs);
    // Callbacks written inline: a named one would be renamed on every call where esbuild keeps names (tsx).
    try {
      this.runner.run(
        DECIDE_SCRIPT,
        numKeys,
        argv,
        (reply) => this.answered(call, reply),
        (cause) => this.broke(call, cause),
      );
    } catch (cause) {
      this.broke(call, cause);
    }
  }

  private broke(call: Call, cause: unknown): void {
    this.failed(
      call,
      new StoreUnavailableError(`Redis failed: ${(cause as Error)?.message ?? cause}`, { cause }),
    );
  }

  private answered(call: Call, reply: unknown): void {
    if (call.settled) return;
    const requests = call.requests;
    const answers = typeof reply !== 'string' ? [] : requests.length === 1 ? [reply] : reply.split(';');
    if (answers.length !== requests.length) {
      this.failed(
        call,
        new StoreUnavailableError('Redis answered the decision script with an unexpected reply'),
      );
      return;
    }
    this.settle(call);
    for (let i = 0; i < requests.length; i++) requests[i].answer(answers[i]);
  }

  private failed(call: Call, error: StoreUnavailableError): void {
    if (call.settled) return;
    const requests = call.requests;
    this.settle(call);
    for (const r of requests) r.fail(error);
  }

  private settle(call: Call): void {
    call.settled = true;
    this.outstanding -= call.requests.length;
    call.requests = NONE;
    // Slots behind the head are emptied as it passes: with calls always in flight the array is rarely empty, and
    // answered calls kept in it kept thousands of decisions, leases and promises alive, each young collection
    // copying them (coalesced at 64 in flight: scavenges of 3–6 MB, 8 ms on average, the decisions' p99).
    const queue = this.queue;
    while (this.head < queue.length && queue[this.head].settled) queue[this.head++] = SETTLED;
    if (this.head === queue.length) {
      queue.length = 0;
      this.head = 0;
    } else if (this.head >= 1024) {
      this.queue = queue.slice(this.head);
      this.head = 0;
    }
  }

  /** Fails the calls past their deadline, then waits for the next one's. */
  private readonly sweep = (): void => {
    this.timer = undefined;
    // Within a millisecond counts as due: a timer's own resolution is a millisecond.
    const due = performance.now() + 1;
    // Failing the head settles it, which moves the head on.
    while (this.head < this.queue.length) {
      const call = this.queue[this.head];
      if (call.deadline > due) {
        this.timer = setTimeout(this.sweep, call.deadline - due + 1);
        return;
      }
      this.failed(call, new StoreUnavailableError(`Redis did not answer within ${this.timeoutMs} ms`));
    }
  };
}
