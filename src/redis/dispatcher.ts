import type { ScriptRunner } from './client.ts';
import { encode, isTryAgain, type Request, StoreUnavailableError, unavailable } from './request.ts';
import { DECIDE_SCRIPT } from './script.ts';
import { keySlot } from './slot.ts';

/** A script call in flight. */
interface Call {
  /** Emptied when settled: an answered call must not keep its decisions (and their leases) alive. */
  requests: Request[];
  /** `performance.now()` past which its requests fail. */
  readonly deadline: number;
  settled: boolean;
  /** Its slot (0 without Cluster). */
  readonly slot: number;
  /**
   * Split after TRYAGAIN: each request resent on its own, this call keeping their deadline. Answered requests are
   * replaced by {@link ANSWERED}; `left` counts the others.
   */
  split: boolean;
  left: number;
  /** Failed at its deadline with requests that want a late reply ({@link Request.late}): its requests, kept. */
  lateRequests: Request[] | undefined;
}

// A bigger batch holds Redis longer; past this the gain per request is small.
const MAX_BATCH = 128;
// Below this a batch is not split early: a call's own cost would outweigh the overlap.
const MIN_SPLIT = 16;
const NONE: Request[] = [];
// What an emptied slot of the calls in flight holds: one object, so the array keeps one element kind.
const SETTLED: Call = {
  requests: NONE,
  deadline: 0,
  settled: true,
  slot: 0,
  split: false,
  left: 0,
  lateRequests: undefined,
};
// A request of a split call that has its answer.
const ANSWERED: Request = { key: '', keysTo() {}, argsTo() {}, answer() {}, fail() {} };
/**
 * After a TRYAGAIN (or a multi-key call that missed its deadline) in a Cluster, the slot's requests go one per call
 * for this long: a slot being migrated refuses a call over several keys while some are moved and some not, and a
 * call of one key follows the client's ASK redirection.
 */
const UNSTABLE_MS = 1000;
// A lone request refused with TRYAGAIN (a chain's keys half moved) asks again after this, until its deadline.
const TRYAGAIN_MS = 5;

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
  /** The timer fired and the calls due are failed after this turn's I/O ({@link expire}). */
  private expiring = false;
  /** Requests sent and not answered yet. */
  private outstanding = 0;
  /** Per slot (one, without Cluster): when a call to it was last answered (`performance.now()`). */
  private readonly answeredAt: Float64Array;
  /** Slots being migrated (Cluster): until when their requests go one per call. Empty in the common case. */
  private readonly unstable = new Map<number, number>();

  constructor(
    private readonly runner: ScriptRunner,
    private readonly timeoutMs: number,
    private readonly coalesce: boolean,
  ) {
    this.answeredAt = new Float64Array(runner.cluster ? 16384 : 1);
  }

  /** Sends `request`: now without coalescing, else with the other requests of this tick (per slot). */
  send(request: Request): void {
    // With nothing in flight and nothing gathered, waiting for the tick's end only delays this decision: go now,
    // and the ones issued after it in this tick gather behind it (one decision at a time is never held back).
    if (!this.coalesce || (this.outstanding === 0 && !this.scheduled)) {
      this.call([request], this.runner.cluster ? keySlot(request.key) : 0);
      return;
    }
    const slot = this.runner.cluster ? keySlot(request.key) : 0;
    if (this.unstable.size > 0 && this.isUnstable(slot)) {
      this.call([request], slot);
      return;
    }
    const group = this.groupOf(slot);
    group.push(request);
    this.gathered(group, slot);
  }

  /**
   * Sends `requests` (keys of one slot) in one call, in this order: now, or with the other requests of this tick
   * for their slot (one per call while the slot is being migrated).
   */
  sendAll(requests: readonly Request[]): void {
    const slot = this.runner.cluster ? keySlot(requests[0].key) : 0;
    if (this.unstable.size > 0 && this.isUnstable(slot)) {
      for (const r of requests) this.call([r], slot);
      return;
    }
    if (!this.coalesce || (this.outstanding === 0 && !this.scheduled)) {
      this.call(requests.slice(), slot);
      return;
    }
    const group = this.groupOf(slot);
    for (const r of requests) group.push(r);
    this.gathered(group, slot);
  }

  /** The group gathering for `slot` (pending for this tick's flush from its first request). */
  private groupOf(slot: number): Request[] {
    let group = this.groups.get(slot);
    if (group === undefined) {
      group = [];
      this.groups.set(slot, group);
    }
    if (group.length === 0) this.pending.push(slot);
    return group;
  }

  /** `group` gathered a request: sent now when large, else at the tick's end. */
  private gathered(group: Request[], slot: number): void {
    // A group as large as what Redis is deciding now goes at once rather than at the end of the tick: Redis
    // decides it while this process answers the rest and gathers the next batch. One batch for everything in
    // flight leaves one side idle while the other works (this process was idle 44 % of the time at 64 in
    // flight).
    if (group.length >= MAX_BATCH || (group.length >= MIN_SPLIT && group.length >= this.outstanding)) {
      this.groups.set(slot, []);
      this.call(group, slot);
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
      if (this.unstable.size > 0 && this.isUnstable(slot)) for (const r of group) this.call([r], slot);
      else this.call(group, slot);
    }
  }

  private call(requests: Request[], slot: number): void {
    const argv = encode(requests);
    const call: Call = {
      requests,
      deadline: performance.now() + this.timeoutMs,
      settled: false,
      slot,
      split: false,
      left: 0,
      lateRequests: undefined,
    };
    this.queue.push(call);
    this.outstanding += requests.length;
    if (!this.expiring) this.timer ??= setTimeout(this.sweep, this.timeoutMs);
    this.run(call, argv);
  }

  /** Sends `call` as `argv`; its answer or failure comes back to `answered` / `broke`. */
  private run(call: Call, argv: { numKeys: number; args: string[] }): void {
    // Callbacks written inline: a named one would be renamed on every call where esbuild keeps names (tsx).
    try {
      this.runner.run(
        DECIDE_SCRIPT,
        argv.numKeys,
        argv.args,
        (reply) => this.answered(call, reply),
        (cause) => this.broke(call, cause),
      );
    } catch (cause) {
      this.broke(call, cause);
    }
  }

  private broke(call: Call, cause: unknown): void {
    if (call.settled) return;
    if (this.runner.cluster && isTryAgain(cause)) {
      // The slot is being migrated and this call named several keys, some moved and some not: each request
      // again on its own, within the same deadline (a single key follows ASK to wherever it is now).
      this.unstable.set(call.slot, performance.now() + UNSTABLE_MS);
      if (call.requests.length > 1) {
        call.split = true;
        call.left = call.requests.length;
        for (let i = 0; i < call.requests.length; i++) this.resend(call, i);
        return;
      }
      if (performance.now() + TRYAGAIN_MS < call.deadline) {
        setTimeout(() => this.retryLone(call), TRYAGAIN_MS);
        return;
      }
    }
    this.failed(call, unavailable(cause));
  }

  /** Runs the lone request of `call` again (it was refused with TRYAGAIN). */
  private retryLone(call: Call): void {
    if (call.settled) return;
    this.run(call, encode(call.requests));
  }

  /** Sends request `i` of a split call on its own (again, after a TRYAGAIN, until the call's deadline). */
  private resend(call: Call, i: number): void {
    const request = call.requests[i];
    if (call.settled || request === ANSWERED) return;
    const argv = encode([request]);
    const done = () => {
      call.requests[i] = ANSWERED;
      if (--call.left === 0) this.settle(call);
    };
    const onError = (cause: unknown) => {
      if (call.settled || call.requests[i] !== request) return;
      if (isTryAgain(cause) && performance.now() + TRYAGAIN_MS < call.deadline) {
        setTimeout(() => this.resend(call, i), TRYAGAIN_MS);
        return;
      }
      done();
      request.fail(unavailable(cause));
    };
    try {
      this.runner.run(
        DECIDE_SCRIPT,
        argv.numKeys,
        argv.args,
        (reply) => {
          if (call.settled && call.lateRequests !== undefined && typeof reply === 'string') {
            request.late?.(reply);
            return;
          }
          if (call.settled || call.requests[i] !== request) return;
          this.answeredAt[call.slot] = performance.now();
          done();
          if (typeof reply === 'string') request.answer(reply);
          else
            request.fail(
              new StoreUnavailableError('Redis answered the decision script with an unexpected reply'),
            );
        },
        onError,
      );
    } catch (cause) {
      onError(cause);
    }
  }

  private isUnstable(slot: number): boolean {
    const until = this.unstable.get(slot);
    if (until === undefined) return false;
    if (performance.now() < until) return true;
    this.unstable.delete(slot);
    return false;
  }

  private answered(call: Call, reply: unknown): void {
    if (call.settled) {
      if (call.lateRequests !== undefined) this.answeredLate(call, reply);
      return;
    }
    if (call.split) return;
    const requests = call.requests;
    const answers = typeof reply !== 'string' ? [] : requests.length === 1 ? [reply] : reply.split(';');
    if (answers.length !== requests.length) {
      this.failed(
        call,
        new StoreUnavailableError('Redis answered the decision script with an unexpected reply'),
      );
      return;
    }
    this.answeredAt[call.slot] = performance.now();
    this.settle(call);
    for (let i = 0; i < requests.length; i++) requests[i].answer(answers[i]);
  }

  /** The reply of a call failed at its deadline: each request that wants it gives back what it was granted. */
  private answeredLate(call: Call, reply: unknown): void {
    const requests = call.lateRequests!;
    call.lateRequests = undefined;
    if (typeof reply !== 'string') return;
    const answers = requests.length === 1 ? [reply] : reply.split(';');
    if (answers.length !== requests.length) return;
    for (let i = 0; i < requests.length; i++) requests[i].late?.(answers[i]);
  }

  private failed(call: Call, error: StoreUnavailableError): void {
    if (call.settled) return;
    const requests = call.requests;
    this.settle(call);
    for (const r of requests) if (r !== ANSWERED) r.fail(error);
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
      // No call in flight, no deadline to keep: an armed timer would hold the process open for up to `timeoutMs`.
      if (this.timer !== undefined) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
    } else if (this.head >= 1024) {
      this.queue = queue.slice(this.head);
      this.head = 0;
    }
  }

  /** Fails the calls past their deadline, then waits for the next one's. */
  private readonly sweep = (): void => {
    this.timer = undefined;
    // Timers run before the event loop reads its sockets: after a busy stretch (a burst encoded, answers decoded)
    // the replies of calls due now may be read already by the kernel, not yet by this process. They are failed
    // only after this turn's I/O (setImmediate runs after the poll phase): a reply that came is not a timeout.
    this.expiring = true;
    setImmediate(this.expire);
  };

  private readonly expire = (): void => {
    this.expiring = false;
    // Within a millisecond counts as due: a timer's own resolution is a millisecond.
    const due = performance.now() + 1;
    // Failing the head settles it, which moves the head on.
    while (this.head < this.queue.length) {
      const call = this.queue[this.head];
      if (call.deadline > due) {
        this.timer ??= setTimeout(this.sweep, call.deadline - due + 1);
        return;
      }
      const error = new StoreUnavailableError(`Redis did not answer within ${this.timeoutMs} ms`);
      // A call over several keys of a slot that missed its deadline in a Cluster may be a client retrying
      // TRYAGAIN on its own (ioredis does, every `retryDelayOnTryAgain`): that slot's requests go one per call
      // for a while, and the node is not skipped for it (if it is down, the next calls say so). Nor for a call
      // to a slot being migrated (a first ASK to a node may wait for the client's connection to it): that node
      // answered TRYAGAIN within the last second.
      if (this.runner.cluster) {
        if (call.split || call.requests.length > 1) {
          this.unstable.set(call.slot, performance.now() + UNSTABLE_MS);
          error.skip = false;
        } else if (this.unstable.size > 0 && this.isUnstable(call.slot)) {
          error.skip = false;
        }
      }
      // Its slot answered a call sent after this one: the node is up, this call alone was late (a first ASK to a
      // node, a burst's tail). Skipping the node would answer its every key by onUnavailable for nothing.
      if (this.answeredAt[call.slot] > call.deadline - this.timeoutMs) error.skip = false;
      // Redis may still run it (a paused server answers its backlog): keep what must be given back then.
      if (call.requests.some((r) => r.late !== undefined)) call.lateRequests = call.requests;
      this.failed(call, error);
    }
  };
}
