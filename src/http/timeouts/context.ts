import type { Attributes } from '../../telemetry.ts';
import type { DeadlineEntry, DeadlineList } from './deadlines.ts';
import type { TimeoutPolicy } from './policy.ts';
import { disconnectReason, timeoutReason } from './reasons.ts';
import type { TimeoutRouteSetting } from './route.ts';

/** How an adapter answers at the deadline. One object per adapter, shared by all its requests. */
export interface TimeoutAdapter {
  /**
   * Called when the policy must answer: at the deadline right after the signal's 'abort' listeners ran, or at the
   * end of the policy's grace (earlier if the handler answered or gave up in it). Returns `'answered'` if the
   * policy's response was sent, `'cut'` if a started response was ended early, `'handler'` if the handler had
   * answered after all.
   */
  expire(context: RequestTimeoutContext): 'answered' | 'cut' | 'handler';
  /** The route and method of the request, for hooks. Called only on timeouts. */
  describe(context: RequestTimeoutContext): { route: string | undefined; method: string | undefined };
  /**
   * The route's template (`/users/:id`) when the framework knows one, for the metrics' `http.route` (never a raw
   * path: that would make one series per URL). Called only on timeouts.
   */
  template?(context: RequestTimeoutContext): string | undefined;
}

/** What a context needs of its engine (`RequestTimeouts`), so that the two files do not import each other. */
export interface TimeoutEngine {
  readonly defaultPolicy: TimeoutPolicy | undefined;
  /** Links the context into the list of its duration, due at `context.due`. */
  schedule(context: RequestTimeoutContext): void;
  unschedule(context: RequestTimeoutContext): void;
  /** The handler answered or gave up during the grace: the policy's turn comes now. */
  endGrace(context: RequestTimeoutContext): void;
  /** A handler that ran past its deadline finished. */
  reportOverrun(context: RequestTimeoutContext): void;
}

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
  /** The deadline passed and the signal aborted: its listeners, or the handler within the grace, may answer. */
  Expired: 1,
  /** Floodgate answered or cut the response. */
  TimedOut: 2,
  /** The response finished before the deadline (or an 'abort' listener answered). */
  Finished: 3,
  /** The client went away first. */
  Disconnected: 4,
} as const;

/** Why a request's signal aborted. */
const Aborted = { No: 0, Timeout: 1, Disconnect: 2 } as const;

/** The context behind {@link RequestTimeout}. Adapters use the members that the interface does not show. */
export class RequestTimeoutContext implements RequestTimeout, DeadlineEntry {
  deadline = Number.POSITIVE_INFINITY;
  /** When the engine acts next: the deadline, then, in a grace, its end. */
  due = Number.POSITIVE_INFINITY;
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
  /** The metric attributes of an overrun, made when floodgate answered (engine). */
  attributes: Attributes | undefined = undefined;
  state: number = State.Running;

  #named: TimeoutPolicy | undefined;
  #route: TimeoutPolicy | undefined;
  #disabled = false;
  #controller: AbortController | undefined;
  /** Why the signal aborted (Aborted), kept as a number: the reason itself is built only if someone reads it. */
  #aborted: number = Aborted.No;
  #reason: unknown;
  #onDone: Array<() => void> | undefined;

  constructor(
    readonly engine: TimeoutEngine,
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
      if (this.#aborted !== Aborted.No) this.#controller.abort(this.#abortReason());
    }
    return this.#controller.signal;
  }

  // A DOMException captures a stack: built only when a signal exists to carry it.
  #abortReason(): unknown {
    if (this.#reason === undefined) {
      const policy = this.current;
      this.#reason =
        this.#aborted === Aborted.Timeout && policy !== undefined
          ? timeoutReason(policy.name, policy.ms)
          : disconnectReason();
    }
    return this.#reason;
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
    this.due = this.deadline;
    if (this.current !== undefined) this.engine.schedule(this);
  }

  /** The deadline passed (engine): the signal aborts with a `TimeoutError`. */
  expire(): void {
    this.state = State.Expired;
    this.#abort(Aborted.Timeout);
  }

  /**
   * The handler gave up after its signal aborted (it rethrew the abort, or the request left a rate limiter's
   * queue): in the grace, the policy answers now rather than at its end (adapters, the rate limiter).
   */
  gaveUp(): void {
    if (this.state === State.Expired) this.engine.endGrace(this);
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
      if (!complete) this.#abort(Aborted.Disconnect);
    } else if (this.state === State.Expired) {
      // In the grace: the handler answered (the engine records it now), or the client went away.
      if (complete) this.engine.endGrace(this);
      else {
        this.engine.unschedule(this);
        this.state = State.Disconnected;
      }
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

  #abort(why: number): void {
    if (this.#aborted !== Aborted.No) return;
    this.#aborted = why;
    if (this.#controller !== undefined) this.#controller.abort(this.#abortReason());
  }
}
