import { ChainLease, HeldLease, type Lease } from '../limiters/lease.ts';
import { telemetry } from '../telemetry.ts';
import { RateLimitedError } from './errors.ts';
import { rateLimitWaitMs, retryAfterMs } from './headers.ts';
import type { ClientConfig, OnLimited } from './options.ts';
import { PauseBook } from './pause-book.ts';

/** Calls counted by a client since it was created. */
export interface ClientStatistics {
  /** Calls that went to the network (each retry counts). */
  sent: number;
  /** Calls refused locally because the limiter had no permit. */
  limited: number;
  /** Calls held back or refused because the server had paused their partition (counted once per call). */
  paused: number;
}

/**
 * What the fetch wrapper and the undici interceptor share: taking a permit for a partition, honouring the
 * server's pauses, and reading answers for new pauses. Transport-neutral: it sees keys, statuses and headers.
 */
export class Gate {
  readonly pauses: PauseBook | undefined;
  readonly statistics: ClientStatistics = { sent: 0, limited: 0, paused: 0 };

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
  }

  /**
   * A granted lease for one call to `key`, or the error saying why the call is refused. Never resolves while
   * the partition is paused; waits (per `onLimited`, or always when `mode` is `'wait'`) end when `signal` aborts,
   * rejecting with its reason.
   */
  async admit(
    key: string,
    origin: string,
    signal: AbortSignal | undefined,
    mode: OnLimited = this.config.onLimited,
  ): Promise<Lease | RateLimitedError> {
    let heldByPause = false;
    const pausedFor = (ms: number): RateLimitedError | undefined => {
      if (!heldByPause) {
        heldByPause = true;
        this.statistics.paused++;
        telemetry().clientCalls.add(1, { result: 'paused', origin });
      }
      return mode === 'wait' ? undefined : new RateLimitedError('paused', ms, key);
    };
    for (;;) {
      let wait = this.pauses?.remaining(key) ?? 0;
      if (wait > 0) {
        const refusal = pausedFor(wait);
        if (refusal) return refusal;
        await sleep(wait, signal);
        continue;
      }
      const lease = await this.config.limiter.acquire(key, 1, signal ? { signal } : undefined);
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
      // A pause may have begun while this call waited in the queue: nothing leaves before it ends.
      for (wait = this.pauses?.remaining(key) ?? 0; wait > 0; wait = this.pauses?.remaining(key) ?? 0) {
        const refusal = pausedFor(wait);
        if (refusal) {
          lease.release();
          return refusal;
        }
        try {
          await sleep(wait, signal);
        } catch (error) {
          lease.release();
          throw error;
        }
      }
      this.statistics.sent++;
      telemetry().clientCalls.add(1, { result: 'sent', origin });
      return lease;
    }
  }

  /**
   * Reads an answer: a pausing status with a usable `Retry-After` (else `RateLimit`) pauses `key`. Returns the
   * milliseconds the partition is now paused for, or `undefined` when the answer pauses nothing.
   */
  observe(
    key: string,
    status: number,
    header: (name: string) => string | null | undefined,
  ): number | undefined {
    const pause = this.config.pause;
    if (pause === false || !pause.statuses.includes(status)) return undefined;
    const wait =
      retryAfterMs(header('retry-after'), this.config.now(), header('date')) ??
      rateLimitWaitMs(header('ratelimit'));
    if (wait === undefined || wait <= 0) return undefined;
    return this.pauses?.pause(key, wait);
  }

  /** Whether a call with `method` may be retried after a pausing answer. */
  mayRetry(method: string, attempt: number): boolean {
    const retry = this.config.retry;
    return attempt < retry.attempts && retry.methods.has(method.toUpperCase());
  }
}

/** Whether releasing `lease` gives a permit back (a concurrency lease, alone or in a chain). */
export function holdsPermits(lease: Lease): boolean {
  if (lease instanceof HeldLease) return true;
  return lease instanceof ChainLease && lease.members.some(holdsPermits);
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
