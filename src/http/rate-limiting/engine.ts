import { describe } from '../../duration.ts';
import { ChainLease, Lease } from '../../limiters/lease.ts';
import { telemetry } from '../../telemetry.ts';
import type { HttpRequest } from '../request.ts';
import {
  buildPolicy,
  type RateLimitingOptions,
  type RejectedContext,
  type RejectingLimiter,
  type ResolvedOptions,
  resolveOptions,
} from './options.ts';
import { type Answer, limitHeaders, rejection, setLimitHeaders } from './response.ts';
import { type Result, RouteLimits } from './route.ts';

/** The outcome of one request's decision. */
export class Decision {
  /** `performance.now()` when a held lease was taken, or -1 when none is held. */
  heldSince = -1;

  constructor(
    readonly route: RouteLimits,
    /** The lease, or undefined when the route is not limited or the request was canceled. */
    readonly lease: Lease | undefined,
    readonly result: Result,
  ) {}

  /** Which limiter rejected: `'global'`, `'endpoint'`, or `'store'` when the Redis store's `onUnavailable` did. */
  get limiter(): RejectingLimiter {
    if (this.result === 'store_unavailable') return 'store';
    return this.result === 'global_limiter' ? 'global' : 'endpoint';
  }
}

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

  /** Throws a `TypeError`/`RangeError` naming the option when `options` are invalid. */
  constructor(options?: RateLimitingOptions) {
    this.options = resolveOptions(options as RateLimitingOptions);
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
   * Decides for one request. Without a queue anywhere in the chain (or in dry-run mode, which never holds a
   * request) the answer is synchronous. `signal(req)` is asked for only when the request may wait (a function
   * made once, so deciding allocates no closure): it should abort when the client goes away or the request
   * times out, which takes the request out of the queue at once.
   * A route on a Redis store is always decided asynchronously (one round trip); memory routes never wait for it.
   */
  decide<R extends HttpRequest>(
    req: R,
    route: RouteLimits,
    signal: (req: R) => AbortSignal | undefined,
  ): Decision | Promise<Decision> {
    if (route.unlimited) return new Decision(route, undefined, 'acquired');
    const remote = route.remote;
    if (remote !== undefined && (!route.mayQueue || this.options.dryRun)) {
      return remote.tryAcquire(req).then((lease) => this.#decided(route, lease));
    }
    if (!route.mayQueue || this.options.dryRun) return this.#decided(route, route.tryAcquire(req));
    const instruments = telemetry();
    const attributes = route.attributes.acquired;
    const started = performance.now();
    instruments.queuedRequests.add(1, attributes);
    let waiting: Promise<Lease>;
    let abort: AbortSignal | undefined;
    try {
      abort = signal(req);
      waiting = route.acquire(req, abort);
    } catch (error) {
      waiting = Promise.reject(error);
    }
    return waiting.then(
      (lease) => {
        instruments.queuedRequests.add(-1, attributes);
        instruments.timeInQueue.record(performance.now() - started, attributes);
        return this.#decided(route, lease);
      },
      (error: unknown) => {
        instruments.queuedRequests.add(-1, attributes);
        // Only our own signal cancels; anything else is a failure the framework should see.
        if (abort === undefined || !abort.aborted || error !== abort.reason) throw error;
        instruments.requests.add(1, route.attributes.canceled);
        return new Decision(route, undefined, 'canceled');
      },
    );
  }

  #decided(route: RouteLimits, lease: Lease): Decision {
    let result: Result;
    // Only a route on a Redis store can be answered by its onUnavailable (granted or not).
    if (route.remote?.isFallback(lease)) result = 'store_unavailable';
    else if (lease.granted) result = 'acquired';
    else if (lease.reason === 'queue-full' || lease.reason === 'evicted') result = 'queue_full';
    else {
      const index = route.members.indexOf(lease.source as never);
      result = index >= 0 && route.isGlobal(index) ? 'global_limiter' : 'endpoint_limiter';
    }
    const attributes = this.options.dryRun ? route.dryRunAttributes : route.attributes;
    telemetry().requests.add(1, attributes[result]);
    if (route.partitioned.length > 0) countPartitions(route);
    const decision = new Decision(route, lease, result);
    if (lease.granted && holdsPermits(lease)) {
      decision.heldSince = performance.now();
      telemetry().activeLeases.add(1, route.attributes.acquired);
    }
    return decision;
  }

  /**
   * Gives a held lease back (the response finished or the client went away). Idempotent; a no-op for leases
   * that hold nothing, which is why adapters only watch the response when {@link Decision.heldSince} ≥ 0.
   */
  release(decision: Decision): void {
    if (decision.heldSince < 0) return;
    const attributes = decision.route.attributes.acquired;
    telemetry().leaseDuration.record(performance.now() - decision.heldSince, attributes);
    telemetry().activeLeases.add(-1, attributes);
    decision.heldSince = -1;
    decision.lease!.release();
  }

  /** The rate-limit header fields for an admitted request. */
  headers(req: HttpRequest, decision: Decision): Array<[string, string]> {
    // An onUnavailable answer knows nothing of the limiters' state.
    if (decision.lease === undefined || decision.result === 'store_unavailable') return [];
    return limitHeaders(this.options, decision.route, req, decision.lease);
  }

  /**
   * Hands the rate-limit header fields of an admitted request to `set(target, name, value)`, one call per field
   * and no array: what adapters use on every request (`target` is the response, `set` a function made once).
   */
  setHeaders<T>(
    req: HttpRequest,
    decision: Decision,
    target: T,
    set: (target: T, name: string, value: string) => void,
  ): void {
    if (decision.lease === undefined || decision.result === 'store_unavailable') return;
    setLimitHeaders(this.options, decision.route, req, decision.lease, target, set);
  }

  /** The rejection floodgate sends when no `onRejected` hook applies. */
  rejection(req: HttpRequest, decision: Decision): Answer {
    const unavailable = decision.result === 'store_unavailable';
    return rejection(
      this.options,
      decision.route,
      req,
      decision.lease!,
      decision.route.policy?.name,
      unavailable,
    );
  }

  /** The context `onRejected` sees, with the answer floodgate will send unless the hook sends its own. */
  rejectedContext<Req, Res>(
    req: HttpRequest,
    decision: Decision,
    request: Req,
    response: Res,
  ): RejectedContext<Req, Res> {
    const route = decision.route;
    const lease = decision.lease!;
    const policy = route.policy?.name;
    const answer = rejection(
      this.options,
      route,
      req,
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

/** Whether releasing `lease` gives something back (a concurrency permit), so the response must be watched. */
export function holdsPermits(lease: Lease): boolean {
  if (lease instanceof ChainLease) {
    for (const member of lease.members) if (member.release !== Lease.prototype.release) return true;
    return false;
  }
  return lease.release !== Lease.prototype.release;
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
