import type { Lease } from '../limiters/lease.ts';
import { OverLimitError } from '../limiters/options.ts';
import { telemetry } from '../telemetry.ts';
import { backoffMs } from './backoff.ts';
import { RateLimitedError, ThrottledError } from './errors.ts';
import type { CallOutcome } from './failure.ts';
import { parseHttpDate, rateLimitWaitMs, retryAfterMs } from './headers.ts';
import type { ClientConfig, OnLimited } from './options.ts';
import { PauseBook } from './pause-book.ts';
import { ProviderBudgets, type Ticket } from './provider-budget.ts';
import { providerQuotas, providerWaitMs, retryAfterMsField } from './provider-headers.ts';
import { RetryBudget } from './retry-budget.ts';
import { AdaptiveThrottle } from './throttle.ts';

/** Slots of the throttler's history and of the retry budget's window. */
const BUCKETS = 20;
/** Partitions whose history and budget are remembered at once (the oldest is forgotten first). */
const MAX_HISTORIES = 10_000;

/** Calls counted by a client since it was created. */
export interface ClientStatistics {
  /** Calls that went to the network (each retry counts). */
  sent: number;
  /** Calls refused locally because the limiter had no permit. */
  limited: number;
  /** Calls held back or refused because the server had paused their partition (counted once per call). */
  paused: number;
  /** Calls (and retries) rejected locally by adaptive throttling: nothing was sent. */
  throttled: number;
  /** Retries sent again (each also counts in `sent`). */
  retries: number;
  /** Retries refused because the retry budget was spent: the last answer was returned instead. */
  budgetExhausted: number;
}

/** How one call goes on after an attempt: a retry after `delayMs`, or the last answer as it is. */
export type RetryDecision = { retry: true; delayMs: number } | { retry: false };

const NO_RETRY: RetryDecision = { retry: false };

/** A call let through: its lease, and its place in the provider's budgets (answer it with {@link Gate.observe}). */
export interface Admitted {
  lease: Lease;
  ticket: Ticket | undefined;
}

/**
 * What the fetch wrapper and the undici interceptor share: taking a permit for a partition, honouring the
 * server's pauses, reading answers for new pauses, adaptive throttling, and deciding retries within the budget.
 * Transport-neutral: it sees keys, statuses, errors and headers.
 */
export class Gate {
  readonly pauses: PauseBook | undefined;
  /** What LLM providers said is left, per partition and unit: calls are paced to it. */
  readonly budgets: ProviderBudgets | undefined;
  readonly throttle: AdaptiveThrottle | undefined;
  readonly budget: RetryBudget | undefined;
  readonly statistics: ClientStatistics = {
    sent: 0,
    limited: 0,
    paused: 0,
    throttled: 0,
    retries: 0,
    budgetExhausted: 0,
  };

  constructor(readonly config: ClientConfig) {
    const pause = config.pause;
    this.pauses =
      pause === false
        ? undefined
        : new PauseBook({
            maxMs: pause.maxMs,
            jitter: pause.jitter,
            maxEntries: pause.maxEntries,
            clock: config.clock,
            random: config.random,
          });
    this.budgets =
      pause === false
        ? undefined
        : new ProviderBudgets({ clock: config.clock, maxMs: pause.maxMs, maxEntries: pause.maxEntries });
    const { adaptive, retry, clock, random } = config;
    const maxEntries = MAX_HISTORIES;
    this.throttle =
      adaptive === false
        ? undefined
        : new AdaptiveThrottle({ ...adaptive, buckets: BUCKETS, maxEntries, clock, random });
    this.budget =
      retry.attempts === 0 || retry.budget === false
        ? undefined
        : new RetryBudget({ ...retry.budget, buckets: BUCKETS, maxEntries, clock });
  }

  /**
   * Starts a call the application made: counts it for the retry budget, and draws against the throttle. Returns
   * the error to fail it with when it is rejected locally (nothing is sent).
   */
  begin(key: string, origin: string): ThrottledError | undefined {
    this.budget?.call(key);
    const p = this.throttle?.reject(key);
    if (p === undefined) return undefined;
    this.countThrottled(origin);
    return new ThrottledError(p, key);
  }

  /**
   * Records what came of an attempt that was sent, for the throttler. A call the caller aborted (other than by a
   * timeout) says nothing about the server and is not recorded.
   */
  settle(key: string, outcome: CallOutcome, callerAborted: boolean): void {
    const { throttle } = this;
    const adaptive = this.config.adaptive;
    if (throttle === undefined || adaptive === false) return;
    if (callerAborted && (outcome.error as { name?: unknown } | undefined)?.name !== 'TimeoutError') return;
    throttle.record(key, !adaptive.isFailure(outcome));
  }

  /**
   * Whether attempt `attempt` (0 for the first) of a call to `key` is tried again, and after how long. Retried:
   * an answer that paused the partition (`paused`; the wait is then the pause, which {@link admit} keeps) or an
   * outcome `retry.isFailure` calls a failure, for a retryable method, while attempts are left, the retry
   * budget has room and the throttler lets the retry go. The wait is the backoff, or the answer's `Retry-After`
   * when longer. The caller checks that the body can be sent again and that it did not abort.
   */
  retryAfter(
    key: string,
    origin: string,
    method: string,
    attempt: number,
    outcome: CallOutcome,
    paused: boolean,
    header?: (name: string) => string | null | undefined,
  ): RetryDecision {
    const retry = this.config.retry;
    if (attempt >= retry.attempts || !retry.methods.has(method.toUpperCase())) return NO_RETRY;
    if (!paused && !retry.isFailure(outcome)) return NO_RETRY;
    if (this.budget !== undefined && !this.budget.tryRetry(key)) {
      this.statistics.budgetExhausted++;
      telemetry().clientRetries.add(1, { result: 'budget-exhausted', origin });
      return NO_RETRY;
    }
    // A retry is a call like any other for the throttler: while the server fails, most retries stay home.
    if (this.throttle?.reject(key) !== undefined) {
      this.countThrottled(origin);
      return NO_RETRY;
    }
    this.statistics.retries++;
    telemetry().clientRetries.add(1, { result: 'retried', origin });
    if (paused) return { retry: true, delayMs: 0 };
    const { baseMs, maxMs } = retry.backoff;
    let delayMs = backoffMs(attempt + 1, baseMs, maxMs, this.config.random);
    const pause = this.config.pause;
    if (header !== undefined && pause !== false) {
      const asked =
        retryAfterMsField(header('retry-after-ms')) ??
        retryAfterMs(header('retry-after'), this.config.now(), header('date'));
      if (asked !== undefined) delayMs = Math.max(delayMs, Math.min(asked, pause.maxMs));
    }
    return { retry: true, delayMs };
  }

  private countThrottled(origin: string): void {
    this.statistics.throttled++;
    telemetry().clientCalls.add(1, { result: 'throttled', origin });
  }

  /**
   * A granted lease for one call to `key`, or the error saying why the call is refused. Never resolves while
   * the partition is paused, nor before the provider's budgets have room for the call (`tokens` in every token
   * unit, one request); waits (per `onLimited`, or always when `mode` is `'wait'`) end when `signal` aborts,
   * rejecting with its reason.
   */
  async admit(
    key: string,
    origin: string,
    signal: AbortSignal | undefined,
    mode: OnLimited = this.config.onLimited,
    permits = 1,
    tokens = permits,
  ): Promise<Admitted | RateLimitedError> {
    let heldByPause = false;
    const pausedFor = (ms: number | undefined): RateLimitedError | undefined => {
      if (!heldByPause) {
        heldByPause = true;
        this.statistics.paused++;
        telemetry().clientCalls.add(1, { result: 'paused', origin });
      }
      return mode === 'wait' ? undefined : new RateLimitedError('paused', ms, key);
    };
    for (;;) {
      const wait = this.pauses?.remaining(key) ?? 0;
      if (wait > 0) {
        const refusal = pausedFor(wait);
        if (refusal) return refusal;
        await sleep(wait, signal);
        continue;
      }
      const lease = await this.config.limiter
        .acquire(key, permits, signal ? { signal } : undefined)
        .catch(tooLarge);
      if (!lease.granted) {
        // A limiter without a queue says 'limit': 'wait' then sleeps until a permit could be had and asks again.
        // A full queue ('queue-full', 'evicted') is the bound the user set, and an overflowing partition table
        // or a concurrency lease gives no time to wait for: those are refused.
        const retry = lease.retryAfterMs;
        if (mode === 'wait' && retry !== undefined && lease.reason === 'limit') {
          await sleep(Math.max(1, retry), signal);
          continue;
        }
        this.statistics.limited++;
        telemetry().clientCalls.add(1, { result: 'limited', origin });
        return new RateLimitedError(lease.reason ?? 'limit', retry, key);
      }
      const ticket = this.budgets?.enter(key, tokens);
      // Refused or aborted while held, the call was never sent: its permits come back (a concurrency lease's by
      // its release, a window's or bucket's by a refund), its estimate with them.
      try {
        const refusal = await this.hold(key, ticket, signal, pausedFor);
        if (refusal) {
          lease.release();
          lease.refund();
          return refusal;
        }
      } catch (error) {
        lease.release();
        lease.refund();
        throw error;
      }
      this.statistics.sent++;
      telemetry().clientCalls.add(1, { result: 'sent', origin });
      return { lease, ticket };
    }
  }

  /**
   * Holds a granted call while its partition is paused (a pause may have begun while it waited in the queue:
   * nothing leaves before it ends) and until the provider's budgets have room for it; `ticket` is then sent.
   * Returns the refusal when `pausedFor` gives one (it left the line).
   */
  private async hold(
    key: string,
    ticket: Ticket | undefined,
    signal: AbortSignal | undefined,
    pausedFor: (ms: number | undefined) => RateLimitedError | undefined,
  ): Promise<RateLimitedError | undefined> {
    const budgets = this.budgets;
    try {
      for (;;) {
        const paused = this.pauses?.remaining(key) ?? 0;
        const wait = paused > 0 ? paused : ticket === undefined ? 0 : (budgets?.waitMs(ticket) ?? 0);
        if (wait <= 0) break;
        const refusal = pausedFor(Number.isFinite(wait) ? wait : undefined);
        if (refusal) {
          if (ticket) budgets?.leave(ticket);
          return refusal;
        }
        if (paused > 0 || ticket === undefined || budgets === undefined) await sleep(paused, signal);
        else await budgets.hold(ticket, wait, signal);
      }
    } catch (error) {
      if (ticket) budgets?.leave(ticket);
      throw error;
    }
    if (ticket) budgets?.send(ticket);
    return undefined;
  }

  /** A call sent failed without an answer: the budgets stop waiting for its answer. */
  failed(ticket: Ticket | undefined): void {
    if (ticket) this.budgets?.answer(ticket, []);
  }

  /** Whether `status` is a refusal that pauses (and is retried after the pause): 429 and 503 by default. */
  refuses(status: number): boolean {
    const pause = this.config.pause;
    return pause !== false && pause.statuses.includes(status);
  }

  /**
   * Reads an answer: its LLM provider fields (any status) update the budgets `ticket`'s partition is paced to,
   * and a pausing status with a usable `retry-after-ms`, `Retry-After`, `RateLimit` or provider fields (the
   * longest reset among the units with nothing left) pauses `key`. Returns the milliseconds the partition is now
   * paused for, or `undefined` when it pauses nothing.
   */
  observe(
    key: string,
    status: number,
    header: (name: string) => string | null | undefined,
    ticket?: Ticket,
  ): number | undefined {
    const pause = this.config.pause;
    if (pause === false) return undefined;
    const now = this.config.now();
    const date = parseHttpDate(header('date')?.trim() ?? '');
    // An LLM provider's fields (any status): the calls after this one are paced to what it says is left.
    if (ticket) this.budgets?.answer(ticket, providerQuotas(header, now, date));
    if (!pause.statuses.includes(status)) return undefined;
    const wait =
      retryAfterMsField(header('retry-after-ms')) ??
      retryAfterMs(header('retry-after'), now, header('date')) ??
      rateLimitWaitMs(header('ratelimit')) ??
      providerWaitMs(header, now, date);
    if (wait === undefined || wait <= 0) return undefined;
    return this.pauses?.pause(key, wait);
  }
}

/** Whether releasing `lease` gives a permit back (a concurrency lease, alone or in a chain). */
export function holdsPermits(lease: Lease): boolean {
  return lease.holdsPermits;
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
        // setTimeout fires at once beyond 2^31-1 ms; the caller asks again after a shorter sleep.
      },
      Math.min(Math.ceil(ms), 2_147_483_647),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A call whose estimate exceeds its limiter's limit could never be granted: rejected at once, before anything is
 * sent, naming both (any other error passes as it is).
 */
function tooLarge(error: unknown): never {
  if (!(error instanceof OverLimitError)) throw error;
  throw new RangeError(
    `floodgate/fetch: the call's cost estimate (${error.permits}) exceeds the limit (${error.limit}) of its limiter, so it could never be sent; give the limiter overdraw: true to let such a call through when its whole budget is free`,
    { cause: error },
  );
}
