import type { DeadlineEntry, DeadlineList } from './deadlines.ts';
import type { RequestTimeouts, TimeoutAdapter } from './engine.ts';
import type { TimeoutPolicy } from './policy.ts';
import { disconnectReason } from './reasons.ts';
import type { TimeoutRouteSetting } from './route.ts';

/**
 * The timeout of one request, as handlers and the rate limiter see it. Get it with `requestTimeoutOf(req)`
 * (or the framework's own place: `request.requestTimeout` in Fastify, `c.var.requestTimeout` in Hono).
 */
export interface RequestTimeout {
  /**
   * Aborts at the deadline with a `DOMException` named `'TimeoutError'`, or earlier when the client disconnects,
   * with a `DOMException` named `'AbortError'`. Pass it to `fetch`, database drivers, `acquire`.
   */
  readonly signal: AbortSignal;
  /** The deadline in `performance.now()` milliseconds; `Infinity` when no policy applies or it was disabled. */
  readonly deadline: number;
  /** Name of the policy in force (`'default'`, a named policy, `'route'`), or `undefined` when none applies. */
  readonly policy: string | undefined;
  /** True once the deadline has passed with the request still running. */
  readonly timedOut: boolean;
  /** Stops this request's timeout. Does nothing once the deadline has passed. The signal still aborts on disconnect. */
  disable(): void;
  /**
   * Calls `callback` once the handler is done (at once if it already is). What "done" means depends on the
   * adapter: the handler's promise for Fastify, Hono and async node:http handlers; the handler's `res.end()` for
   * Express and callback-style handlers. If the client disconnects first, the handler counts as done then
   * (Express, callback-style node:http), since nothing else can be observed.
   */
  onHandlerDone(callback: () => void): void;
}

/** Request states. Plain numbers: the state is read on every request. */
const State = {
  /** In flight, possibly with a deadline. */
  Running: 0,
  /** The deadline passed and the signal is aborting: its listeners may still answer. */
  Expired: 1,
  /** Floodgate answered or cut the response. */
  TimedOut: 2,
  /** The response finished before the deadline (or an 'abort' listener answered). */
  Finished: 3,
  /** The client went away first. */
  Disconnected: 4,
} as const;

/** The context behind {@link RequestTimeout}. Adapters use the members that the interface does not show. */
export class RequestTimeoutContext implements RequestTimeout, DeadlineEntry {
  deadline = Number.POSITIVE_INFINITY;
  prevInList: DeadlineEntry | null = null;
  nextInList: DeadlineEntry | null = null;
  list: DeadlineList | null = null;
  /** The policy in force. */
  current: TimeoutPolicy | undefined;
  /** Set by adapters that observe the handler's promise, so that the response closing is not taken as "done". */
  doneByPromise = false;
  /** Whether the handler was still running when floodgate answered. */
  overran = false;
  /** Whether the handler finished. */
  done = false;
  /** `performance.now()` when an overrunning handler finished (only measured then: the clock is not free). */
  doneAt = -1;
  state: number = State.Running;

  #named: TimeoutPolicy | undefined;
  #route: TimeoutPolicy | undefined;
  #disabled = false;
  #controller: AbortController | undefined;
  #reason: unknown;
  #onDone: Array<() => void> | undefined;

  constructor(
    readonly engine: RequestTimeouts,
    readonly adapter: TimeoutAdapter,
    /** The adapter's handle on the response (a `ServerResponse`, a Fastify reply, a Hono state). */
    readonly target: unknown,
    readonly start: number,
  ) {
    this.current = engine.defaultPolicy;
  }

  get signal(): AbortSignal {
    // Created on first use: most requests never look at their signal, and an AbortController is not free.
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#reason !== undefined) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get policy(): string | undefined {
    return this.current?.name;
  }

  get timedOut(): boolean {
    return this.state === State.Expired || this.state === State.TimedOut;
  }

  get expired(): boolean {
    return this.state === State.Expired;
  }

  get running(): boolean {
    return this.state === State.Running;
  }

  disable(): void {
    if (this.state !== State.Running) return;
    this.#disabled = true;
    this.#resolve();
  }

  onHandlerDone(callback: () => void): void {
    if (this.done) callback();
    else if (this.#onDone === undefined) this.#onDone = [callback];
    else this.#onDone.push(callback);
  }

  /** Applies a route setting (adapters). Too late once the deadline has passed. */
  apply(setting: TimeoutRouteSetting): void {
    if (this.state !== State.Running) return;
    if (setting.kind === 'disable') this.#disabled = true;
    else if (setting.kind === 'route') this.#route = setting.policy;
    else this.#named = setting.policy;
    this.#resolve();
  }

  // Precedence: disabling wins, then the route's own duration or policy, then a named policy, then the default.
  #resolve(): void {
    this.current = this.#disabled ? undefined : (this.#route ?? this.#named ?? this.engine.defaultPolicy);
    this.engine.unschedule(this);
    this.deadline = this.current === undefined ? Number.POSITIVE_INFINITY : this.start + this.current.ms;
    if (this.current !== undefined) this.engine.schedule(this);
  }

  /** The deadline passed (engine). */
  expire(reason: unknown): void {
    this.state = State.Expired;
    this.#abort(reason);
  }

  /** Floodgate answered or cut the response (engine). */
  markTimedOut(overran: boolean): void {
    this.state = State.TimedOut;
    this.overran = overran;
  }

  /** An 'abort' listener answered (engine). */
  markFinished(): void {
    this.state = State.Finished;
  }

  /**
   * The response closed (adapters): finished if `complete`, otherwise the client went away. Before the deadline
   * this ends the timeout; after it, only the handler's own end counts.
   */
  responseClosed(complete: boolean): void {
    if (this.state === State.Running) {
      this.engine.unschedule(this);
      this.state = complete ? State.Finished : State.Disconnected;
      if (!complete) this.#abort(disconnectReason());
    } else if (this.state === State.Expired) {
      // Complete: an 'abort' listener answered; the engine sees that when it comes to answer.
      if (!complete) this.state = State.Disconnected;
    } else if (this.state !== State.Finished) {
      // Timed out: only the handler's own end (or promise) says it is done, not the close of our answer.
      return;
    }
    if (!this.doneByPromise) this.handlerDone();
  }

  /** The handler finished (adapters). Idempotent. */
  handlerDone(): void {
    if (this.done) return;
    this.done = true;
    if (this.state === State.TimedOut && this.overran) {
      this.doneAt = performance.now();
      this.engine.reportOverrun(this);
    }
    const callbacks = this.#onDone;
    this.#onDone = undefined;
    if (callbacks) for (const callback of callbacks) callback();
  }

  #abort(reason: unknown): void {
    if (this.#reason !== undefined) return;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
