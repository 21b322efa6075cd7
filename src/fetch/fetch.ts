import { describe } from '../duration.ts';
import { releaseOnBody } from './body-release.ts';
import { type CostOptions, costConfig, estimateOf, settleFrom } from './cost.ts';
import { RateLimitedError, type ThrottledError } from './errors.ts';
import { type ClientStatistics, Gate, holdsPermits, sleep } from './gate.ts';
import { localResponse } from './local-response.ts';
import { FETCH_OPTIONS } from './option-names.ts';
import { type ClientOptions, clientConfig } from './options.ts';

/** Options of {@link rateLimitedFetch}. */
export interface RateLimitedFetchOptions extends ClientOptions {
  /** The fetch to wrap. Default the global `fetch`, looked up at construction. */
  fetch?: typeof fetch;
  /**
   * What a call costs, for a limiter that counts cost (`unit: 'tokens'`): each call asks for `estimate(url,
   * init)` permits and is settled at `actual(response)` (see `llmUsage`). Default: one permit per call.
   */
  cost?: CostOptions;
}

/** A `fetch` with a local quota per partition, that also obeys the pauses servers ask for. */
export interface RateLimitedFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** Calls sent, limited, paused, throttled and retried, since creation (a copy). */
  readonly statistics: ClientStatistics;
  /** Milliseconds before `key` (an origin, by default) may call again after a server's pause; 0 if none. */
  pausedFor(key: string): number;
  /** The probability that the next call to `key` is rejected by adaptive throttling; 0 without `adaptive`. */
  rejectionProbability(key: string): number;
}

/**
 * Wraps `fetch` for calls to third-party APIs with a quota. Each call takes a permit from `limiter` for its
 * partition (its origin, or `key(url)`) before it leaves; with `onLimited` it then waits (default, in the
 * limiter's queue, abortable through the request's own `signal`), throws a {@link RateLimitedError}, or resolves
 * with a local `429` that never reached the network. A `429`/`503` answer with `Retry-After` or a draft-10
 * `RateLimit` field pauses the partition: no call to it leaves before the time given. An LLM provider's
 * rate-limit fields (OpenAI's `x-ratelimit-*`, Anthropic's `anthropic-ratelimit-*`) pace the calls after them to
 * what each unit has left and its refill rate, learned from the answers. A concurrency permit is
 * held until the response body is read to the end or cancelled: always consume or cancel bodies. With `retry`,
 * failed idempotent calls (network errors, timeouts, 5xx) are sent again after a jittered backoff, within a retry
 * budget; with `adaptive`, calls are rejected locally (a {@link ThrottledError}) while most recent calls fail.
 *
 * @example
 * const api = rateLimitedFetch({
 *   limiter: tokenBucket({ tokenLimit: 10, tokensPerPeriod: 10, period: '1s', queueLimit: 100 }),
 *   retry: 2,
 *   adaptive: true,
 * });
 * const res = await api('https://api.example.com/items', { signal: AbortSignal.timeout(30_000) });
 */
export function rateLimitedFetch(options: RateLimitedFetchOptions): RateLimitedFetch {
  const config = clientConfig('rateLimitedFetch', options, FETCH_OPTIONS);
  const inner = options.fetch ?? globalThis.fetch;
  if (typeof inner !== 'function') {
    throw new TypeError(`rateLimitedFetch: fetch must be a function; got ${describe(inner)}`);
  }
  const cost = costConfig('rateLimitedFetch', options.cost, options.limiter?.shape?.timeBased);
  const gate = new Gate(config);
  const keyOf = config.key;
  const retries = config.retry.attempts > 0;

  const limitedFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url =
      typeof input === 'string' ? new URL(input) : input instanceof URL ? input : new URL(input.url);
    const origin = url.origin;
    const key = keyOf === undefined ? origin : keyOf(url);
    if (typeof key !== 'string') {
      throw new TypeError(`rateLimitedFetch: key() must return a string; got ${describe(key)}`);
    }
    const request = input instanceof Request ? input : undefined;
    const signal = init?.signal ?? request?.signal ?? undefined;
    const method = init?.method ?? request?.method ?? 'GET';
    // A retry sends the request again: its body must be replayable (a Request is cloned per attempt).
    const replayable = retries && replayableBody(init?.body);
    const permits = cost === undefined ? 1 : estimateOf('rateLimitedFetch', cost, url, init);
    const throttled = gate.begin(key, origin);
    if (throttled !== undefined) {
      if (config.onLimited === 'respond') return localResponse(throttled);
      throw throttled;
    }
    for (let attempt = 0; ; attempt++) {
      // Retries were asked for: they wait out the pause whatever `onLimited` says.
      const admitted = await gate.admit(
        key,
        origin,
        signal,
        attempt > 0 ? 'wait' : config.onLimited,
        permits,
      );
      if (admitted instanceof RateLimitedError) {
        if (config.onLimited === 'respond') return localResponse(admitted);
        throw admitted;
      }
      const { lease, ticket } = admitted;
      let response: Response;
      try {
        response = await inner(replayable && request ? request.clone() : input, init);
      } catch (error) {
        gate.failed(ticket);
        lease.release();
        const aborted = signal?.aborted === true;
        gate.settle(key, { error }, aborted);
        if (!replayable || aborted) throw error;
        const decision = gate.retryAfter(key, origin, method, attempt, { error }, false);
        if (!decision.retry) throw error;
        await sleep(decision.delayMs, signal);
        continue;
      }
      const status = response.status;
      const header = (name: string) => response.headers.get(name);
      gate.settle(key, { status }, false);
      // Only a refusal that paused is retried: an answer that only said nothing is left is the caller's.
      const paused = gate.observe(key, status, header, ticket) !== undefined && gate.refuses(status);
      if (replayable && !signal?.aborted) {
        const decision = gate.retryAfter(key, origin, method, attempt, { status }, paused, header);
        if (decision.retry) {
          lease.release();
          // Nobody will read this answer: cancelling frees the connection for the retry.
          await response.body?.cancel().catch(() => {});
          await sleep(decision.delayMs, signal);
          continue;
        }
      }
      if (cost !== undefined) settleFrom(cost, response, lease);
      return holdsPermits(lease) ? releaseOnBody(response, lease) : response;
    }
  };

  return Object.defineProperties(limitedFetch as RateLimitedFetch, {
    statistics: { get: () => ({ ...gate.statistics }), enumerable: true },
    pausedFor: { value: (key: string) => gate.pauses?.remaining(key) ?? 0 },
    rejectionProbability: { value: (key: string) => gate.throttle?.probability(key) ?? 0 },
  });
}

/** Whether a fetch body can be sent again: a stream or an async iterable is read once. */
function replayableBody(body: unknown): boolean {
  if (body === undefined || body === null) return true;
  if (body instanceof ReadableStream) return false;
  return typeof (body as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] !== 'function';
}
