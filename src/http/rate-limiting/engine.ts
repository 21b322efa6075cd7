import { describe } from '../../duration.ts';
import { KeyedResource } from '../../limiters/keyed.ts';
import { Lease, type ReleaseOutcome } from '../../limiters/lease.ts';
import type { MemoryLimiter } from '../../limiters/limiter.ts';
import { OverLimitError } from '../../limiters/options.ts';
import { rankOf } from '../../limiters/priority.ts';
import { telemetry } from '../../telemetry.ts';
import { emitFloodgateWarning } from '../../warning.ts';

import { Decision } from './decision.ts';
import {
  buildPolicy,
  type RateLimitingOptions,
  type RejectedContext,
  type ResolvedOptions,
  resolveOptions,
} from './options.ts';
import type { ClientKey } from './per-client.ts';
import { type Answer, limitHeaders, rejection, setLimitHeaders } from './response.ts';
import { RouteLimits } from './route.ts';
import type { Result, RouteMetrics } from './route-metrics.ts';

/** Whether metrics are recorded at all: adapters skip finding a route template nobody will see. */
export { metricsRecorded } from '../../telemetry.ts';

export { Decision };

/**
 * The framework-neutral rate-limiting engine: validated policies, one chain per route setting, decisions,
 * headers, rejections and metrics. Adapters create one per `rateLimiting(options)` call and translate.
 */
export class RateLimiting {
  readonly options: ResolvedOptions;
  /** The route limits of routes that name no policy. */
  readonly defaultRoute: RouteLimits;
  /** Routes that do no limiting. */
  readonly disabledRoute: RouteLimits;
  readonly #named = new Map<string, RouteLimits>();

  /**
   * Throws a `TypeError`/`RangeError` naming the option when `options` are invalid. `clientKey` makes the
   * default key of `limit`/`window` (default `clientIp`), for an adapter whose hooks see another object.
   */
  // biome-ignore lint/suspicious/noExplicitAny: adapters type the request; the engine takes any
  constructor(options?: RateLimitingOptions<any, any>, clientKey?: ClientKey) {
    this.options = resolveOptions(options as RateLimitingOptions, clientKey);
    this.defaultRoute = this.#own(new RouteLimits(this.options.global, undefined, this.options.onRejected));
    this.disabledRoute = this.#own(new RouteLimits(undefined, undefined, undefined));
    for (const [name, policy] of this.options.policies) {
      this.#named.set(name, this.#own(new RouteLimits(this.options.global, policy, this.options.onRejected)));
    }
  }

  /**
   * Validates a route setting now, so a route naming a policy that does not exist fails where it is declared:
   * `undefined` (the global limiter only), a policy name, `false` (no limiting), or an inline policy.
   */
  route(setting: unknown, where = 'route'): RouteLimits {
    if (setting === undefined) return this.defaultRoute;
    if (setting === false) return this.disabledRoute;
    if (typeof setting === 'string') {
      const named = this.#named.get(setting);
      if (named === undefined) {
        const known = [...this.#named.keys()].map((k) => JSON.stringify(k)).join(', ') || 'none';
        throw new RangeError(
          `${where}: no rate-limiting policy named ${describe(setting)} (known: ${known})`,
        );
      }
      return named;
    }
    const policy = buildPolicy(where, 'route', setting, true);
    return this.#own(new RouteLimits(this.options.global, policy, this.options.onRejected, where));
  }

  #own(route: RouteLimits): RouteLimits {
    route.owner = this;
    route.refund = route.policy?.refund ?? this.options.refund;
    route.priority = route.policy?.priority ?? this.options.priority;
    // `defaultRoute` is made first: every later route can fall back to it when its policy skips a request.
    route.globalOnly = this.defaultRoute;
    return route;
  }

  /**
   * A route marker's setting, which must name a policy or give an inline one: `undefined` and `false` are
   * mistakes here (the global limiter alone needs no marker; `noRateLimit()` disables).
   */
  requiredRoute(setting: unknown, where = 'requirePolicy()'): RouteLimits {
    if (setting === undefined || setting === false) {
      throw new TypeError(
        `${where}: name a policy (or give an inline one); use noRateLimit() to disable limiting`,
      );
    }
    return this.route(setting, where);
  }

  /**
   * Decides for one request. Each partitioned member's key function runs here, exactly once; an async one is
   * awaited (then the decision is a Promise). Without a queue anywhere in the chain (or in dry-run mode, which
   * never holds a request) and with synchronous keys the answer is synchronous. `signal(context)` is asked for
   * only when the request may wait (a function made once, so deciding allocates no closure): it should abort
   * when the client goes away or the request times out, which takes the request out of the queue at once.
   * A route on a Redis store is always decided asynchronously (one round trip); memory routes never wait for it.
   * A key function that throws makes this throw (or reject): nothing is charged.
   * `metrics` are the route's attributes under its template (`route.metricsFor(template)`, found once where the
   * adapter can) when the adapter knows the template: then every instrument carries `http.route`.
   */
  decide<C>(
    req: unknown,
    res: unknown,
    route: RouteLimits,
    signal: (context: C) => AbortSignal | undefined,
    context: C,
    metrics: RouteMetrics = route.metrics,
  ): Decision | Promise<Decision> {
    if (route.unlimited) return new Decision(route, undefined, 'acquired');
    const skip = this.options.skip;
    if (skip !== undefined) {
      const verdict = skip(req, res);
      if (isThenable(verdict)) {
        return Promise.resolve(verdict).then((skipped) =>
          skipped ? skippedDecision(route) : this.#policySkip(req, res, route, signal, context, metrics),
        );
      }
      if (verdict) return skippedDecision(route);
    }
    return this.#policySkip(req, res, route, signal, context, metrics);
  }

  // A request the route's policy skips is decided by the global limiter alone.
  #policySkip<C>(
    req: unknown,
    res: unknown,
    route: RouteLimits,
    signal: (context: C) => AbortSignal | undefined,
    context: C,
    metrics: RouteMetrics,
  ): Decision | Promise<Decision> {
    const skip = route.skip;
    if (skip === undefined) return this.#costed(req, res, route, signal, context, metrics);
    const verdict = skip(req, res);
    const next = (skipped: unknown): Decision | Promise<Decision> => {
      if (!skipped) return this.#costed(req, res, route, signal, context, metrics);
      const global = route.globalOnly ?? this.defaultRoute;
      // Counted under the global limiter's policy, still on the request's route.
      const labelled = global.metricsFor(metrics.template);
      return global.unlimited
        ? skippedDecision(route)
        : this.#costed(req, res, global, signal, context, labelled);
    };
    return isThenable(verdict) ? Promise.resolve(verdict).then(next) : next(verdict);
  }

  // A route with a cost takes its estimate (awaited when async) rather than one permit.
  #costed<C>(
    req: unknown,
    res: unknown,
    route: RouteLimits,
    signal: (context: C) => AbortSignal | undefined,
    context: C,
    metrics: RouteMetrics,
  ): Decision | Promise<Decision> {
    const cost = route.cost;
    if (cost === undefined) return this.#keyed(req, res, route, signal, context, metrics, 1);
    const estimate = cost.estimate(req, res);
    const next = (value: unknown): Decision | Promise<Decision> =>
      this.#keyed(req, res, route, signal, context, metrics, checkEstimate(route, value));
    return isThenable(estimate) ? Promise.resolve(estimate).then(next) : next(estimate);
  }

  #keyed<C>(
    req: unknown,
    res: unknown,
    route: RouteLimits,
    signal: (context: C) => AbortSignal | undefined,
    context: C,
    metrics: RouteMetrics,
    permits: number,
  ): Decision | Promise<Decision> {
    // The request's class: synchronous, so a memory route stays synchronous; a number, so nothing is allocated.
    const priority = route.priority;
    const rank = priority === undefined ? undefined : rankOf(PRIORITY, priority(req, res));
    if (!route.keyed) return this.#decideKeyed(undefined, route, signal, context, rank, metrics, permits);
    const lone = route.tryAcquireKey;
    const keyOfs = route.keyOfs;
    let keys: unknown[];
    if (lone !== undefined && (!route.mayQueue || this.options.dryRun)) {
      // One partitioned limiter in memory, nothing to wait for: decided by its key, with no KeyedResource (the
      // lease carries the key for the header fields).
      const key = keyOfs[0]!(req);
      if (typeof key === 'string') return this.#decided(route, lone(key, rank), undefined, metrics);
      keys = [key];
    } else {
      keys = new Array(keyOfs.length);
      for (let i = 0; i < keyOfs.length; i++) {
        const keyOf = keyOfs[i];
        if (keyOf === undefined) continue;
        // The same function on two members (one clientIp() for global and policy) gives one key.
        keys[i] = i > 0 && keyOf === keyOfs[i - 1] ? keys[i - 1] : keyOf(req);
      }
    }
    let pending = false;
    for (const key of keys) if (typeof key !== 'string' && isThenable(key)) pending = true;
    if (!pending) {
      const resource = new KeyedResource(route.members, keys as (string | undefined)[]);
      return this.#decideKeyed(resource, route, signal, context, rank, metrics, permits);
    }
    return Promise.all(keys).then((awaited) =>
      this.#decideKeyed(
        new KeyedResource(route.members, awaited as (string | undefined)[]),
        route,
        signal,
        context,
        rank,
        metrics,
        permits,
      ),
    );
  }

  #decideKeyed<C>(
    resource: KeyedResource | undefined,
    route: RouteLimits,
    signal: (context: C) => AbortSignal | undefined,
    context: C,
    rank: number | undefined,
    metrics: RouteMetrics,
    permits: number,
  ): Decision | Promise<Decision> {
    if (permits === 1) return this.#ask(resource, route, signal, context, rank, metrics, 1);
    // A cost estimate: one above the limit of a limiter that does not overdraw is the client's (413), not ours.
    const tooLarge = (error: unknown): Decision => this.#tooLarge(error, route, resource, metrics);
    try {
      const decided = this.#ask(resource, route, signal, context, rank, metrics, permits);
      return isThenable(decided) ? (decided as Promise<Decision>).then(undefined, tooLarge) : decided;
    } catch (error) {
      return tooLarge(error);
    }
  }

  /**
   * The rejection of a cost estimate larger than a limit that does not allow `overdraw`: it could never be
   * granted, so it is answered at once (reason `'too-large'`, no `Retry-After`); any other error is rethrown.
   */
  #tooLarge(
    error: unknown,
    route: RouteLimits,
    resource: KeyedResource | undefined,
    metrics: RouteMetrics,
  ): Decision {
    if (!(error instanceof OverLimitError)) throw error;
    const index = route.members.indexOf(error.source as never);
    const member = route.members[index];
    const key = resource?.keys[index];
    const remaining = member?.store.sync === true ? (member as MemoryLimiter).available(key) : 0;
    const lease = Lease.rejected('too-large', { limit: error.limit, remaining, source: error.source, key });
    return this.#decided(route, lease, resource, metrics);
  }

  #ask<C>(
    resource: KeyedResource | undefined,
    route: RouteLimits,
    signal: (context: C) => AbortSignal | undefined,
    context: C,
    rank: number | undefined,
    metrics: RouteMetrics,
    permits: number,
  ): Decision | Promise<Decision> {
    const remote = route.remote;
    if (remote !== undefined && (!route.mayQueue || this.options.dryRun)) {
      return remote
        .tryAcquire(resource, rank, permits)
        .then((lease) => this.#decided(route, lease, resource, metrics));
    }
    if (!route.mayQueue || this.options.dryRun) {
      return this.#decided(route, route.tryAcquire(resource, rank, permits), resource, metrics);
    }
    const instruments = telemetry();
    const attributes = metrics.held;
    const started = performance.now();
    instruments.queuedRequests.add(1, attributes);
    let waiting: Promise<Lease>;
    let abort: AbortSignal | undefined;
    try {
      abort = signal(context);
      waiting = route.acquire(resource, abort, rank, permits);
    } catch (error) {
      waiting = Promise.reject(error);
    }
    return waiting.then(
      (lease) => {
        instruments.queuedRequests.add(-1, attributes);
        const decision = this.#decided(route, lease, resource, metrics);
        // In seconds, by the result the wait ended with (a full queue rejects through here too).
        instruments.timeInQueue.record(
          (performance.now() - started) / 1000,
          metrics.results[decision.result],
        );
        return decision;
      },
      (error: unknown) => {
        instruments.queuedRequests.add(-1, attributes);
        // Only our own signal cancels; anything else is a failure the framework should see.
        if (abort === undefined || !abort.aborted || error !== abort.reason) throw error;
        instruments.timeInQueue.record((performance.now() - started) / 1000, metrics.results.canceled);
        instruments.requests.add(1, metrics.results.canceled);
        return new Decision(route, undefined, 'canceled', resource, metrics);
      },
    );
  }

  #decided(
    route: RouteLimits,
    lease: Lease,
    resource: KeyedResource | undefined,
    metrics: RouteMetrics,
  ): Decision {
    let result: Result;
    // Only a route on a Redis store can be answered by its onUnavailable (granted or not).
    if (route.remote?.isFallback(lease)) result = 'store_unavailable';
    else if (lease.granted) result = 'acquired';
    else if (lease.reason === 'queue-full' || lease.reason === 'evicted') result = 'queue_full';
    else {
      const index = route.members.indexOf(lease.source as never);
      result = index >= 0 && route.isGlobal(index) ? 'global_limiter' : 'endpoint_limiter';
    }
    const attributes = this.options.dryRun ? metrics.dryRun : metrics.results;
    telemetry().requests.add(1, attributes[result]);
    if (route.partitioned.length > 0) countPartitions(route);
    const decision = new Decision(route, lease, result, resource, metrics);
    if (lease.granted && holdsPermits(lease)) {
      decision.heldSince = performance.now();
      telemetry().activeLeases.add(1, metrics.held);
    }
    return decision;
  }

  /**
   * Gives a held lease back (the response finished or the client went away). Idempotent; a no-op for leases
   * that hold nothing, which is why adapters only watch the response when {@link Decision.heldSince} ≥ 0.
   * `outcome` reaches an adaptive limiter: see {@link outcomeOfStatus}.
   */
  release(decision: Decision, outcome?: ReleaseOutcome): void {
    if (decision.heldSince < 0) return;
    const attributes = decision.metrics.held;
    telemetry().leaseDuration.record((performance.now() - decision.heldSince) / 1000, attributes);
    telemetry().activeLeases.add(-1, attributes);
    decision.heldSince = -1;
    decision.lease!.release(outcome);
  }

  /**
   * The response of a granted request finished (`completed`), or its client went away first: gives the permits
   * back when the route's refund rule says so (`skipSuccessfulRequests`, `skipFailedRequests`). Adapters call
   * it once per request, only when {@link Decision.refundable}. An async `requestWasSuccessful` is awaited; if it
   * throws, nothing is refunded.
   */
  finished(decision: Decision, req: unknown, res: unknown, completed: boolean, status: number): void {
    const rule = decision.route.refund;
    const lease = decision.lease;
    if (rule === undefined || lease === undefined || !lease.granted) return;
    if (!completed) {
      if (rule.failed) lease.refund();
      return;
    }
    const apply = (successful: unknown): void => {
      if (successful ? rule.successful : rule.failed) lease.refund();
    };
    if (rule.wasSuccessful === undefined) {
      apply(status < 400);
      return;
    }
    let verdict: unknown;
    try {
      verdict = rule.wasSuccessful(req, res);
    } catch {
      return;
    }
    if (isThenable(verdict)) Promise.resolve(verdict).then(apply, () => {});
    else apply(verdict);
  }

  /**
   * A costed request's response ended: settles at what `cost.actual` reads unless settled already; a bad answer
   * keeps the estimate, with a warning (nobody else could hear it now). Adapters call it once per request.
   */
  settleCost(decision: Decision, req: unknown, res: unknown): void {
    const actual = decision.route.cost?.actual;
    const lease = decision.lease;
    if (actual === undefined || lease === undefined || !lease.granted) return;
    if (lease.unsettleable() !== undefined) return; // settled by the handler, or refunded
    let value: unknown;
    let problem: string;
    try {
      value = actual(req, res);
      if (value === undefined) return;
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
        problem = `answered ${describe(value)}, not a whole number ≥ 0`;
      } else {
        lease.settle(value);
        return;
      }
    } catch (error) {
      const message = (error as Error | undefined)?.message ?? String(error);
      problem =
        value === undefined ? `threw (${message})` : `answered ${value}, which did not settle (${message})`;
    }
    emitFloodgateWarning(
      'FLOODGATE_COST_ACTUAL',
      `rateLimiting: policy ${JSON.stringify(decision.route.policy?.name ?? 'global')}: cost.actual(req, res) ${problem}; the request keeps its estimate`,
    );
  }

  /** The rate-limit header fields for an admitted request. */
  headers(decision: Decision): Array<[string, string]> {
    // An onUnavailable answer knows nothing of the limiters' state.
    if (decision.lease === undefined || decision.result === 'store_unavailable') return [];
    return limitHeaders(this.options, decision.route, decision.resource, decision.lease);
  }

  /**
   * Hands the rate-limit header fields of an admitted request to `set(target, name, value)`, one call per field
   * and no array: what adapters use on every request (`target` is the response, `set` a function made once).
   */
  setHeaders<T>(decision: Decision, target: T, set: (target: T, name: string, value: string) => void): void {
    if (decision.lease === undefined || decision.result === 'store_unavailable') return;
    setLimitHeaders(this.options, decision.route, decision.resource, decision.lease, target, set);
  }

  /** The rejection floodgate sends when no `onRejected` hook applies. */
  rejection(decision: Decision): Answer {
    const unavailable = decision.result === 'store_unavailable';
    return rejection(
      this.options,
      decision.route,
      decision.resource,
      decision.lease!,
      decision.route.policy?.name,
      unavailable,
    );
  }

  /** The context `onRejected` sees, with the answer floodgate will send unless the hook sends its own. */
  rejectedContext<Req, Res>(decision: Decision, request: Req, response: Res): RejectedContext<Req, Res> {
    const route = decision.route;
    const lease = decision.lease!;
    const policy = route.policy?.name;
    const answer = rejection(
      this.options,
      route,
      decision.resource,
      lease,
      policy,
      decision.result === 'store_unavailable',
    );
    const headers = new Headers();
    for (const [name, value] of answer.headers) headers.append(name, value);
    return {
      request,
      response,
      lease,
      policy,
      limiter: decision.limiter,
      dryRun: this.options.dryRun,
      status: answer.status,
      headers,
      body: answer.body,
    };
  }
}

const PRIORITY = 'rateLimiting: priority(req, res)';
const DROPPED: ReleaseOutcome = { dropped: true };
const IGNORED: ReleaseOutcome = { ignore: true };

/**
 * What a finished response says about the work it guarded, for an adaptive concurrency limiter: 502, 503 and 504
 * (a dependency failed, was overloaded, or the request timed out) are drops; a response that never finished (the
 * client went away) measures nothing; anything else is a success whose time is a latency sample.
 */
export function outcomeOfStatus(finished: boolean, status: number): ReleaseOutcome | undefined {
  if (!finished) return IGNORED;
  return status >= 502 && status <= 504 ? DROPPED : undefined;
}

// A skipped request: no lease, so no header fields, no hold and nothing counted.
function skippedDecision(route: RouteLimits): Decision {
  return new Decision(route, undefined, 'acquired');
}

// An estimate: a whole number ≥ 1 (the limiter says whether it fits), else the error goes where the framework's
// go. Not 0: a zero-permit ask is a probe, which reserves nothing and so could not be settled.
function checkEstimate(route: RouteLimits, value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1) return value;
  const where = `rateLimiting: policy ${JSON.stringify(route.policy?.name ?? 'global')}: cost.estimate(req, res)`;
  if (typeof value !== 'number') {
    throw new TypeError(`${where} must return a whole number ≥ 1; got ${describe(value)}`);
  }
  throw new RangeError(`${where} must return a whole number ≥ 1 (a finite cost); got ${describe(value)}`);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/** Whether releasing `lease` gives something back (a concurrency permit), so the response must be watched. */
export function holdsPermits(lease: Lease): boolean {
  return lease.holdsPermits;
}

// Partitions alive, per partitioned limiter: the limiters keep no metrics, so the size is compared after each
// decision and the change recorded. A limiter in several routes has a MemberInfo in each: the first to see a
// change records it, the others catch up without counting it again.
const countedSizes = new WeakMap<object, number>();

function countPartitions(route: RouteLimits): void {
  for (const info of route.partitioned) {
    const size = (info.member as { size: number }).size;
    if (size === info.knownSize) continue;
    info.knownSize = size;
    const counted = countedSizes.get(info.member) ?? 0;
    if (size !== counted) {
      countedSizes.set(info.member, size);
      telemetry().partitions.add(size - counted, info.attributes);
    }
  }
}
