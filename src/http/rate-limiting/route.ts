import { ChainLimiter } from '../../limiters/chain.ts';
import { keyFor } from '../../limiters/keyed.ts';
import type { Lease } from '../../limiters/lease.ts';
import type { MemoryLimiter } from '../../limiters/limiter.ts';
import { MemberInfo } from './member-info.ts';
import {
  GLOBAL,
  type Member,
  type OnRejected,
  type Policy,
  type PriorityHook,
  type RefundRule,
  type RequestHook,
} from './options.ts';
import { RouteMetrics } from './route-metrics.ts';
import { checkOneStore, isRemote, type RemoteDecider, remoteDecider } from './stores.ts';

/** How many route templates one route setting labels its metrics with (the rest go without `http.route`). */
export const MAX_TEMPLATES = 1000;

/**
 * What one route is limited by, computed once when the route is declared: the global limiter and the route's
 * policy as one all-or-nothing chain, and how to ask it (without a Promise when nothing can queue).
 */
export class RouteLimits {
  /** Every limiter in force, global ones first. */
  readonly members: readonly Member[];
  /** The header/metric name of each member. */
  readonly names: readonly string[];
  /** What the headers need of each member. */
  readonly infos: readonly MemberInfo[];
  /** The partitioned members, whose size the `partitions` metric follows. */
  readonly partitioned: readonly MemberInfo[];
  /** How many of `members` belong to the global limiter. */
  readonly globalCount: number;
  /** Whether any member may hold a request in a queue (then `acquire` is used, else `tryAcquire`). */
  readonly mayQueue: boolean;
  /** The policy name for metrics and `onRejected`: the route's policy, or `'global'`. */
  readonly metricPolicy: string;
  /** The metric attributes of requests whose route template is not known, allocated once. */
  readonly metrics: RouteMetrics;
  readonly #byTemplate = new Map<string, RouteMetrics>();
  readonly onRejected: OnRejected | undefined;
  /**
   * Each member's key function (undefined for a plain limiter), called once per request by the engine, which
   * hands the limiters the keys it got (a `KeyedResource`) rather than the request.
   */
  readonly keyOfs: readonly (((req: unknown) => unknown) | undefined)[];
  /** Whether a member is partitioned (then requests are keyed before deciding). */
  readonly keyed: boolean;
  /**
   * Decides now for a keyed request; never waits. Memory limiters only: a route on a Redis store uses
   * {@link remote}. `rank` is the request's class (see {@link priority}), for every member.
   */
  readonly tryAcquire: (resource: unknown, rank?: number) => Lease;
  /**
   * For a route whose only limiter is a partitioned one in memory: decides now by the key itself, with no
   * `KeyedResource` to build (the commonest route: a per-client global limiter).
   */
  readonly tryAcquireKey: ((key: string, rank?: number) => Lease) | undefined;
  /** Decides for a keyed request, waiting in a queue when a member has one. */
  readonly acquire: (resource: unknown, signal: AbortSignal | undefined, rank?: number) => Promise<Lease>;
  /** How the route decides when its limiters are on a Redis store (then every decision is a Promise). */
  readonly remote: RemoteDecider | undefined;
  /**
   * The `RateLimiting` engine that made this route, set by it: adapters mark a decided request with its route
   * alone and tell their own marks from another engine's by this.
   */
  owner: object | undefined = undefined;
  /** The policy's `skip`: when it says so, the request is decided by {@link globalOnly} instead. */
  readonly skip: RequestHook | undefined;
  /** The route that decides a request this route's policy skips (the global limiter alone). Set by the engine. */
  globalOnly: RouteLimits | undefined = undefined;
  /** Which granted requests give their permits back after the response (the policy's rule, else the global one). Set by the engine. */
  refund: RefundRule | undefined = undefined;
  /** The request's class: the policy's `priority`, else the global one; undefined: none asked. Set by the engine. */
  priority: PriorityHook | undefined = undefined;

  /**
   * Throws a `TypeError` (prefixed with `where`) when the global limiter and the policy are not on one store:
   * their chain could not be all-or-nothing.
   */
  constructor(
    readonly global: Policy | undefined,
    /** The route's own policy, or undefined when only the global limiter applies. */
    readonly policy: Policy | undefined,
    fallbackOnRejected: OnRejected | undefined,
    where = 'rateLimiting',
  ) {
    const members: Member[] = [];
    const names: string[] = [];
    for (const source of [global, policy]) {
      if (source === undefined) continue;
      source.members.forEach((member, i) => {
        members.push(member);
        names.push(i === 0 ? source.name : `${source.name}.${i + 1}`);
      });
    }
    this.members = members;
    this.names = names;
    this.infos = members.map((member, i) => new MemberInfo(member, names[i]));
    // Partitions on a Redis store live in Redis: the `partitions` metric follows memory limiters only.
    this.partitioned = this.infos.filter(
      (info) => (info.member as Partial<MemoryLimiter>).size !== undefined,
    );
    this.globalCount = global?.members.length ?? 0;
    this.metricPolicy = policy?.name ?? GLOBAL;
    this.onRejected = policy?.onRejected ?? fallbackOnRejected;
    this.skip = policy?.skip;
    this.mayQueue = members.some((member) => member.mayQueue);
    this.metrics = new RouteMetrics(this.metricPolicy, undefined);

    this.keyOfs = this.infos.map((info) => info.keyOf as ((req: unknown) => unknown) | undefined);
    this.keyed = this.keyOfs.some((keyOf) => keyOf !== undefined);
    if (members.length > 0) checkOneStore(where, members, names);
    const remote = members.length > 0 && isRemote(members[0]) ? remoteDecider(members as never) : undefined;
    let lone: ((key: string, rank?: number) => Lease) | undefined;
    this.remote = remote;
    if (remote !== undefined) {
      this.tryAcquire = () => {
        throw new Error('floodgate: a route on a Redis store decides through route.remote');
      };
      this.acquire = (req, signal, rank) => remote.acquire(req, signal, rank);
    } else if (members.length === 0) {
      this.tryAcquire = () => {
        throw new Error('floodgate: a route without limiters has nothing to decide');
      };
      this.acquire = this.tryAcquire as never;
    } else if (members.length === 1) {
      // One limiter in memory: asked through the contract's template methods, by its key.
      const only = members[0] as MemoryLimiter;
      if (only.keyOf === undefined) {
        this.tryAcquire = (_req, rank) => only.tryAcquireFor(undefined, 1, this.refund !== undefined, rank);
        this.acquire = (_req, signal, rank) => only.acquireFor(undefined, 1, signal, rank);
      } else {
        const keyOf = only as { readonly keyOf: (resource: unknown) => unknown };
        this.tryAcquire = (req, rank) =>
          only.tryAcquireFor(keyFor(keyOf, req), 1, this.refund !== undefined, rank);
        // The keys are the engine's already (a KeyedResource): nothing here can throw.
        this.acquire = (req, signal, rank) => only.acquireFor(keyFor(keyOf, req), 1, signal, rank);
        // Refundable leases only where a refund rule may ask for one (set by the engine after construction).
        lone = (key, rank) => only.tryAcquireFor(key, 1, this.refund !== undefined, rank);
      }
    } else {
      // Several in memory: one synchronous all-or-nothing chain, binding each member through the contract.
      const chain = new ChainLimiter<unknown>(members as MemoryLimiter[]);
      this.tryAcquire = (req, rank) => chain.tryAcquireFor(req, 1, true, rank);
      this.acquire = (req, signal, rank) => chain.acquireFor(req, 1, signal, rank);
    }
    this.tryAcquireKey = lone;
  }

  /**
   * The metric attributes of this route setting under a route template (`http.route`), made once per template:
   * adapters that know the template when a route is declared ask here then; one that learns it per request
   * (several routes sharing this setting) asks per request and gets the same object. Past
   * {@link MAX_TEMPLATES} templates (a router mounted on a parameter gives raw prefixes), the rest go unlabelled.
   */
  metricsFor(template: string | undefined): RouteMetrics {
    if (template === undefined) return this.metrics;
    let metrics = this.#byTemplate.get(template);
    if (metrics === undefined) {
      if (this.#byTemplate.size >= MAX_TEMPLATES) return this.metrics;
      metrics = new RouteMetrics(this.metricPolicy, template);
      this.#byTemplate.set(template, metrics);
    }
    return metrics;
  }

  /** Whether nothing limits this route (disabled, or no global limiter and no policy). */
  get unlimited(): boolean {
    return this.members.length === 0;
  }

  /** Whether member `index` belongs to the global limiter. */
  isGlobal(index: number): boolean {
    return index < this.globalCount;
  }
}
