// undici is an optional peer: this file imports its types only, so loading floodgate/fetch never loads undici.

import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { describe } from '../duration.ts';
import type { Lease } from '../limiters/lease.ts';
import { type CostConfig, costConfig, estimateOf, settleWith } from './cost.ts';
import { RateLimitedError } from './errors.ts';
import type { CallOutcome } from './failure.ts';
import { type ClientStatistics, Gate, type RetryDecision, sleep } from './gate.ts';
import { LOCAL_HEADER, localStatus } from './local-response.ts';
import { INTERCEPTOR_OPTIONS } from './option-names.ts';
import { type ClientOptions, clientConfig } from './options.ts';
import type { Ticket } from './provider-budget.ts';

type Handler = Dispatcher.DispatchHandler;
type Controller = Dispatcher.DispatchController;
type Headers = Record<string, string | string[] | undefined>;

/**
 * undici's dispatch function (`Dispatcher.Dispatch`) by its shape. The public types name no undici type, so
 * floodgate/fetch type-checks without undici (an optional peer) installed; undici's `Dispatch` and this one are
 * assignable to each other, so `agent.compose(rateLimitInterceptor(…))` type-checks where undici is.
 */
export type DispatchFunction = (
  options: { origin?: string | URL; path: string; method: string },
  handler: object,
) => boolean;

/** What an intercepted request is, for its cost estimate: undici's dispatch options, by their shape. */
export interface InterceptedRequest {
  method: string;
  path: string;
  headers?: unknown;
  body?: unknown;
}

/** Options of {@link rateLimitInterceptor}. */
export interface RateLimitInterceptorOptions extends ClientOptions {
  /**
   * What a call costs, for a limiter that counts cost (`unit: 'tokens'`): each call asks for `estimate(url,
   * request)` permits and is settled at `actual(response)` — a `Response` whose body is a copy of the chunks
   * the caller's handler receives, read as they arrive (`llmUsage`, `jsonUsage`, `sseUsage`). Default: one
   * permit per call.
   */
  cost?: {
    estimate: (url: URL, request: InterceptedRequest) => number;
    actual?: (response: Response) => number | undefined | PromiseLike<number | undefined>;
  };
}

/** An undici interceptor (`Dispatcher.DispatcherComposeInterceptor`) that also reports what it counted. */
export interface RateLimitInterceptor {
  (dispatch: DispatchFunction): DispatchFunction;
  /** Calls sent, limited, paused, throttled and retried, since creation (a copy). */
  readonly statistics: ClientStatistics;
  /** Milliseconds before `key` (an origin, by default) may call again after a server's pause; 0 if none. */
  pausedFor(key: string): number;
  /** The probability that the next call to `key` is rejected by adaptive throttling; 0 without `adaptive`. */
  rejectionProbability(key: string): number;
}

/**
 * The behaviour of {@link rateLimitedFetch} as an undici 7 dispatcher interceptor (the `onRequestStart` /
 * `onResponseStart` handler API; undici 6 handlers are not supported), for code that uses
 * undici directly: `new Agent().compose(rateLimitInterceptor({ limiter }))`. Waits end when the dispatch
 * options' `signal` aborts (undici's `request()` passes its `signal` there). A concurrency permit is held until
 * the response ends or fails. With `onLimited: 'respond'` the handler receives a local 429; with `'throw'`, an
 * error through `onResponseError` (undici's `request()` rejects with it). `retry` and `adaptive` work as in
 * {@link rateLimitedFetch}; a failed attempt is retried only while the caller's handler has seen no answer.
 *
 * @example
 * const agent = new Agent().compose(rateLimitInterceptor({ limiter: tokenBucket({ … }), retry: 2 }));
 * const { statusCode, body } = await request('https://api.example.com/items', { dispatcher: agent });
 */
export function rateLimitInterceptor(options: RateLimitInterceptorOptions): RateLimitInterceptor {
  const config = clientConfig('rateLimitInterceptor', options, INTERCEPTOR_OPTIONS);
  const cost = costConfig<InterceptedRequest>(
    'rateLimitInterceptor',
    options.cost,
    options.limiter?.shape?.timeBased,
  );
  const gate = new Gate(config);
  const interceptor: Dispatcher.DispatcherComposeInterceptor = (dispatch) =>
    function rateLimited(opts: Dispatcher.DispatchOptions, handler: Handler): boolean {
      let origin: string;
      let key: string;
      let permits = 1;
      try {
        origin = originOf(opts.origin);
        const url = new URL(opts.path, origin);
        key = config.key === undefined ? origin : config.key(url);
        if (typeof key !== 'string') {
          throw new TypeError(`rateLimitInterceptor: key() must return a string; got ${describe(key)}`);
        }
        if (cost !== undefined) permits = estimateOf('rateLimitInterceptor', cost, url, opts);
      } catch (error) {
        handler.onResponseError?.(new Facade(), error as Error);
        return true;
      }
      const signal = (opts as { signal?: unknown }).signal;
      const call = new Call(
        gate,
        dispatch,
        opts,
        handler,
        key,
        origin,
        signal instanceof AbortSignal ? signal : undefined,
        permits,
        cost,
      );
      call.start();
      // The request is ours now, queued or sent: the dispatcher can take more.
      return true;
    };
  return Object.defineProperties(interceptor as unknown as RateLimitInterceptor, {
    statistics: { get: () => ({ ...gate.statistics }), enumerable: true },
    pausedFor: { value: (key: string) => gate.pauses?.remaining(key) ?? 0 },
    rejectionProbability: { value: (key: string) => gate.throttle?.probability(key) ?? 0 },
  });
}

/**
 * The controller the caller's handler sees, once, for every attempt: it forwards to the attempt in flight,
 * so that a retry does not start the caller's request over.
 */
class Facade implements Controller {
  current: Controller | undefined;
  private abortReason: Error | null = null;

  get aborted(): boolean {
    return this.abortReason !== null || (this.current?.aborted ?? false);
  }
  get paused(): boolean {
    return this.current?.paused ?? false;
  }
  get reason(): Error | null {
    return this.abortReason ?? this.current?.reason ?? null;
  }
  /** Whether the caller aborted through this controller. */
  get abortedByCaller(): boolean {
    return this.abortReason !== null;
  }
  abort(reason: Error): void {
    this.abortReason ??= reason;
    this.current?.abort(reason);
  }
  pause(): void {
    this.current?.pause();
  }
  resume(): void {
    this.current?.resume();
  }
}

/** One intercepted request, through its attempts. */
class Call implements Handler {
  private readonly facade = new Facade();
  private started = false;
  private attempts = 0;
  private lease: Lease | undefined;
  private ticket: Ticket | undefined;
  /** The copy of the answer's body the cost reader reads, while it reads. */
  private copy: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** The answer in flight is read to its end and dropped; the call is sent again after `delayMs`. */
  private retrying = false;
  private delayMs = 0;
  /** The caller's handler has seen an answer: nothing can be retried any more. */
  private delivered = false;

  constructor(
    private readonly gate: Gate,
    private readonly dispatch: Dispatcher.Dispatch,
    private readonly opts: Dispatcher.DispatchOptions,
    private readonly handler: Handler,
    private readonly key: string,
    private readonly origin: string,
    private readonly signal: AbortSignal | undefined,
    private readonly permits: number,
    private readonly cost: CostConfig<InterceptedRequest> | undefined,
  ) {}

  /** Sends the call, unless the throttler rejects it. */
  start(): void {
    const throttled = this.gate.begin(this.key, this.origin);
    if (throttled === undefined) this.attempt();
    else if (this.gate.config.onLimited === 'respond') this.respondLocally(throttled);
    else this.fail(throttled);
  }

  private attempt(): void {
    const mode = this.attempts > 0 ? 'wait' : this.gate.config.onLimited;
    this.gate.admit(this.key, this.origin, this.signal, mode, this.permits).then(
      (admitted) => {
        if (admitted instanceof RateLimitedError) {
          if (this.gate.config.onLimited === 'respond') this.respondLocally(admitted);
          else this.fail(admitted);
          return;
        }
        if (this.facade.aborted) {
          this.gate.failed(admitted.ticket);
          admitted.lease.release();
          this.fail(this.facade.reason as Error);
          return;
        }
        this.lease = admitted.lease;
        this.ticket = admitted.ticket;
        this.retrying = false;
        try {
          this.dispatch(this.opts, this);
        } catch (error) {
          this.onResponseError(this.facade, error as Error);
        }
      },
      (error: Error) => this.fail(error),
    );
  }

  onRequestStart(controller: Controller, context: unknown): void {
    this.facade.current = controller;
    if (this.started) return;
    this.started = true;
    this.handler.onRequestStart?.(this.facade, context);
  }

  onRequestUpgrade(_controller: Controller, statusCode: number, headers: Headers, socket: Duplex): void {
    this.release();
    this.handler.onRequestUpgrade?.(this.facade, statusCode, headers, socket);
  }

  onResponseStart(
    _controller: Controller,
    statusCode: number,
    headers: Headers,
    statusMessage?: string,
  ): void {
    const header = (name: string) => first(headers[name]);
    const outcome = { status: statusCode };
    this.gate.settle(this.key, outcome, false);
    const paused =
      this.gate.observe(this.key, statusCode, header, this.ticket) !== undefined &&
      this.gate.refuses(statusCode);
    if (this.mayRetry()) {
      const decision = this.decide(outcome, paused, header);
      if (decision.retry) {
        // Read this answer to its end (it frees the connection) without showing it to the caller.
        this.retrying = true;
        this.delayMs = decision.delayMs;
        return;
      }
    }
    this.delivered = true;
    this.readCost(statusCode, headers);
    this.handler.onResponseStart?.(this.facade, statusCode, headers, statusMessage);
  }

  onResponseData(_controller: Controller, chunk: Buffer): void {
    if (this.retrying) return;
    // A copy: undici may reuse the chunk's memory once the handler returns.
    this.copy?.enqueue(new Uint8Array(chunk));
    this.handler.onResponseData?.(this.facade, chunk);
  }

  onResponseEnd(_controller: Controller, trailers: Headers): void {
    this.release();
    if (this.retrying) {
      this.again();
      return;
    }
    this.copy?.close();
    this.copy = undefined;
    this.handler.onResponseEnd?.(this.facade, trailers);
  }

  onResponseError(_controller: Controller, error: Error): void {
    this.gate.failed(this.ticket);
    this.copy?.error(error);
    this.copy = undefined;
    this.release();
    // An error while the dropped answer was read: the retry was decided already.
    if (this.retrying) {
      this.again();
      return;
    }
    const aborted = this.callerAborted();
    const outcome = { error };
    this.gate.settle(this.key, outcome, aborted);
    if (!this.delivered && !aborted && this.mayRetry()) {
      const decision = this.decide(outcome, false);
      if (decision.retry) {
        this.delayMs = decision.delayMs;
        this.again();
        return;
      }
    }
    this.handler.onResponseError?.(this.facade, error);
  }

  /** The next attempt, after the backoff (abortable through the signal). */
  private again(): void {
    this.attempts++;
    const delay = this.delayMs;
    if (delay <= 0) {
      this.attempt();
      return;
    }
    sleep(delay, this.signal).then(
      () => this.attempt(),
      (error: Error) => this.fail(error),
    );
  }

  private decide(
    outcome: CallOutcome,
    paused: boolean,
    header?: (name: string) => string | undefined,
  ): RetryDecision {
    return this.gate.retryAfter(
      this.key,
      this.origin,
      this.opts.method,
      this.attempts,
      outcome,
      paused,
      header,
    );
  }

  private callerAborted(): boolean {
    return this.facade.abortedByCaller || this.signal?.aborted === true;
  }

  private mayRetry(): boolean {
    if (this.attempts >= this.gate.config.retry.attempts || this.callerAborted()) return false;
    const body = this.opts.body;
    return body == null || typeof body === 'string' || body instanceof Uint8Array;
  }

  /**
   * Settles the call's lease at what `cost.actual` reads from a copy of the answer, fed the chunks the caller's
   * handler receives (nothing is held back). An answer that has no body keeps the estimate.
   */
  private readCost(status: number, headers: Headers): void {
    const lease = this.lease;
    if (this.cost?.actual === undefined || lease === undefined || status < 200 || NO_BODY.has(status)) return;
    const fields = new globalThis.Headers();
    for (const [name, value] of Object.entries(headers)) {
      for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value])
        fields.append(name, one);
    }
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.copy = controller;
      },
      cancel: () => {
        this.copy = undefined;
      },
    });
    settleWith(this.cost as CostConfig<never>, new Response(body, { status, headers: fields }), lease);
  }

  private release(): void {
    const lease = this.lease;
    this.lease = undefined;
    lease?.release();
  }

  private fail(error: Error): void {
    this.handler.onResponseError?.(this.facade, error);
  }

  /** Plays a local 429 to the caller's handler: it never reached the network. */
  private respondLocally(error: RateLimitedError): void {
    const body = Buffer.from(error.message);
    const headers: Headers = {
      'content-type': 'text/plain; charset=utf-8',
      'content-length': String(body.length),
      [LOCAL_HEADER]: error.reason,
    };
    if (error.retryAfterMs !== undefined) {
      headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterMs / 1000)));
    }
    const handler = this.handler;
    const facade = this.facade;
    try {
      if (!this.started) {
        this.started = true;
        handler.onRequestStart?.(facade, {});
      }
      if (facade.aborted) {
        this.fail(facade.reason as Error);
        return;
      }
      const [status, statusText] = localStatus(error);
      handler.onResponseStart?.(facade, status, headers, statusText);
      if (facade.aborted) return;
      handler.onResponseData?.(facade, body);
      handler.onResponseEnd?.(facade, {});
    } catch (caught) {
      this.fail(caught as Error);
    }
  }
}

/** Statuses whose answers have no body (a `Response` refuses one). */
const NO_BODY = new Set([204, 205, 304]);

function originOf(origin: string | URL | undefined): string {
  if (origin === undefined) throw new TypeError('rateLimitInterceptor: the request has no origin');
  return typeof origin === 'string' ? new URL(origin).origin : origin.origin;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
