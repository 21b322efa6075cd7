import { describe } from '../../duration.ts';
import type { ChainLimiter } from '../../limiters/chain.ts';
import type { Lease } from '../../limiters/lease.ts';
import {
  isLimiter,
  type Limiter,
  leaves,
  type MemoryLimiter,
  type StoredLimiter,
  type StoredLimiterChain,
} from '../../limiters/limiter.ts';
import type { PartitionedLimiter } from '../../limiters/partitioned.ts';
import type { Priority } from '../../limiters/priority.ts';
import type { RateLimiter } from '../../limiters/rate-limiter.ts';
import { rejectUnknown } from '../../options/known.ts';
import {
  checkSecret,
  type HeaderStyle,
  type PartitionKeyHasher,
  parseHeaderStyles,
  partitionKeyHasher,
} from '../ratelimit-headers.ts';
import type { HttpRequest } from '../request.ts';
import { silenceWarnings } from '../warnings.ts';
import {
  type ClientKey,
  checkGlobal,
  PER_CLIENT_OPTION_NAMES,
  type PerClientOptions,
  perClientLimiter,
} from './per-client.ts';

/**
 * What a policy limits with: a limiter (`fixedWindow(...)`: one bucket for every request it sees), a
 * `partitioned(...)` limiter (one bucket per key of the request, e.g. per client), or a `chain(...)` of them —
 * in memory, or on a Redis store (`store.limiter(...)`, `store.partitioned(...)`, `store.chain(...)`) for a
 * limit shared by every instance, or a limiter of your own (anything implementing `Limiter`). The limiters of
 * one route (global and policy) must all be on one store.
 */
// biome-ignore lint/suspicious/noExplicitAny: untyped uses accept limiters keyed by any request type
export type HttpLimiter<Req = any> =
  | RateLimiter
  | PartitionedLimiter<Req>
  | ChainLimiter<Req>
  | ChainLimiter<void>
  | StoredLimiter<Req>
  | StoredLimiterChain<Req>
  | Limiter<Req>;

/**
 * Which limiter of the chain said no: the global limiter, the route's policy, or `'store'` when the Redis store
 * did not answer and its `onUnavailable` did (`'fail-closed'`, or an insurance limiter that said no).
 */
export type RejectingLimiter = 'global' | 'endpoint' | 'store';

/**
 * What `onRejected` sees, and may change: `status`, `headers` and `body` are what will be sent. It may also
 * answer by itself (write the response in node:http, Express and Fastify; return a `Response` in Hono), and
 * then floodgate sends nothing.
 */
export interface RejectedContext<Req = unknown, Res = unknown> {
  /** The framework's request (node `IncomingMessage`, Express `req`, Fastify `request`, Hono `Context`). */
  readonly request: Req;
  /** The framework's response (node `ServerResponse`, Express `res`, Fastify `reply`, Hono `Context`). */
  readonly response: Res;
  /** The rejected lease: `reason`, `retryAfterMs`, `limit`, `remaining`. */
  readonly lease: Lease;
  /** The route's policy name (`'route'` for an inline one), or `undefined` when only the global limiter applies. */
  readonly policy: string | undefined;
  /** Which limiter said no. */
  readonly limiter: RejectingLimiter;
  /** True in dry-run mode: the request will go through whatever this hook does to the answer. */
  readonly dryRun: boolean;
  /** The status to send. Default 429. */
  status: number;
  /** The header fields to send: `Retry-After`, `RateLimit-Policy`, `RateLimit`, `Content-Type`. */
  headers: Headers;
  /**
   * The body to send: a string, or an object sent as JSON (`application/json` unless `headers` names another
   * content type), e.g. `ctx.body = { error: 'rate_limited' }`.
   */
  body: string | object;
}

/** Called for every rejected request (and, in dry-run mode, every request that would have been). */
// biome-ignore lint/suspicious/noExplicitAny: each adapter narrows the context's request and response
export type OnRejected<Req = any, Res = any> = (context: RejectedContext<Req, Res>) => unknown;

/** A request hook's answer, or a promise of it (awaited). */
export type MaybePromise<T> = T | PromiseLike<T>;

/**
 * When a request is not limited, and when a granted request gives its permits back after its response
 * (express-rate-limit's names, so migrating is a rename), and the request's class for adaptive limiters. On
 * `rateLimiting()` for every route; on a policy for its routes (a policy's settings replace the global ones).
 */
export interface RequestRules<Req = unknown, Res = unknown> {
  /**
   * Requests it returns true for (sync or async) are not limited: on `rateLimiting()`, neither decided nor counted
   * by any limiter and sent no RateLimit fields; on a policy, limited by the global limiter only.
   */
  skip?: (req: Req, res: Res) => MaybePromise<boolean>;
  /** Successful requests (see `requestWasSuccessful`) give their permits back when the response finishes. */
  skipSuccessfulRequests?: boolean;
  /**
   * Failed requests (see `requestWasSuccessful`; a client that went away before the response finished counts as
   * failed) give their permits back. The login brute-force pattern is `skipSuccessfulRequests` instead.
   */
  skipFailedRequests?: boolean;
  /** Whether a finished response counts as successful. Default: status below 400. */
  requestWasSuccessful?: (req: Req, res: Res) => MaybePromise<boolean>;
  /**
   * The request's class for `adaptiveConcurrency()` limiters: `'critical'`, `'default'`, `'sheddable'` or a number
   * (higher is more important). Under contention lower classes are shed first, and a limiter's
   * `classes.reserve` keeps a share of its limit for the classes above. Synchronous on purpose: it runs on every
   * request, before the decision, and must not make a memory route wait. Called once per request, after `skip`.
   * On a policy it replaces the global one for the policy's routes; the class goes to every limiter of the route
   * (the global limiter's too), whose queue serves higher classes first. Limiters on a Redis store ignore it.
   * Returning anything else throws, like a key function that throws. Default: every request is `'default'`.
   */
  priority?: (req: Req, res: Res) => Priority;
}

/** A route's cost (docs/rate-limiting.md, "Costs"): an estimate taken before the handler, the real cost after. */
export interface RouteCost<Req = unknown, Res = unknown> {
  /** The permits a request takes: a whole number ≥ 1, sync or async; a throw or a bad number fails the request. */
  estimate: (req: Req, res: Res) => MaybePromise<number>;
  /**
   * The real cost, read once the response has ended; `undefined` (or a bad value, with a warning) keeps the
   * estimate. Not asked when the handler called `rateLimit.settle(n)`.
   */
  actual?: (req: Req, res: Res) => number | undefined;
}

/** A named or inline policy with its own options. */
export interface RateLimitPolicyOptions<Req = unknown, Res = unknown> extends RequestRules<Req, Res> {
  /** The route's cost (see {@link RouteCost}). Default: one permit per request. */
  cost?: RouteCost<Req, Res>;
  /**
   * The limiter. A plain limiter is one bucket for every route using the policy; partition it to split. A
   * partitioned limiter's key function receives the framework's request (see {@link RateLimitingOptions}).
   */
  limiter: HttpLimiter<Req>;
  /** Called when this policy (or the global limiter, on its routes) rejects. Default: the global `onRejected`. */
  onRejected?: OnRejected<Req, Res>;
  /** The name reported in headers and metrics, for an inline policy. Default `'route'`. */
  name?: string;
}

/**
 * Every option name of {@link RateLimitPolicyOptions}: any other is refused, with the closest of these named.
 * Add a name here with its option.
 */
export const RATE_LIMIT_POLICY_OPTION_NAMES: readonly string[] = [
  'limiter',
  'onRejected',
  'name',
  'cost',
  'skip',
  'skipSuccessfulRequests',
  'skipFailedRequests',
  'requestWasSuccessful',
  'priority',
];

/** A policy: a limiter, or a limiter with options. */
export type RateLimitPolicy<Req = unknown, Res = unknown> =
  | HttpLimiter<Req>
  | RateLimitPolicyOptions<Req, Res>;

/** How a route is limited: by a named policy, an inline one, or not at all (`false`). */
export type RouteLimit<Req = unknown, Res = unknown> = string | false | RateLimitPolicy<Req, Res>;

/**
 * Options of `rateLimiting()` in every adapter. Every hook — a partitioned limiter's `key`, `onRejected` —
 * receives the framework's own objects: `Req` is node's `IncomingMessage`, Express's `Request`, Fastify's
 * `FastifyRequest`, Hono's `Context`; `Res` the matching response (`ServerResponse`, Express `Response`, Fastify
 * `FastifyReply`, Hono `Context`).
 */
export interface RateLimitingOptions<Req = unknown, Res = unknown>
  extends RequestRules<Req, Res>,
    PerClientOptions<Req> {
  /**
   * The limiter every request goes through, chained with route policies: `partitioned({ key: clientIp(), … })`
   * for one budget per client (what `limit` and `window` make). A limiter that is not partitioned is one budget
   * for the whole server (a warning says so unless `shared: true`).
   */
  global?: HttpLimiter<Req>;
  /** Policies that routes name. An unknown name fails when the route is declared. */
  policies?: Record<string, RateLimitPolicy<Req, Res>>;
  /** Called for every rejection a policy without its own hook makes. */
  onRejected?: OnRejected<Req, Res>;
  /** The status of a rejection. Default 429 (the model's 503 tells load balancers the server is down). */
  status?: number;
  /** The body of a rejection: a short text (default) or `'problem+json'` (RFC 9457, `quota-exceeded`). */
  body?: 'text' | 'problem+json' | 'problem';
  /**
   * Which rate-limit header fields to send on every limited response. Default `['draft-10']` (the IETF
   * `RateLimit-Policy`/`RateLimit` fields); add `'legacy'` for `X-RateLimit-*`; `[]` for none.
   * `Retry-After` is always sent on a rejection when a time is known.
   */
  headers?: HeaderStyle | readonly HeaderStyle[];
  /**
   * Salt for the `pk` hashes of partition keys, at least 16 characters: share it between instances so clients
   * see one `pk`. Default: random per process.
   */
  partitionKeySecret?: string;
  /** Decide and report (headers, metrics, `onRejected` with `dryRun: true`) but let every request through. */
  dryRun?: boolean;
  /**
   * `false` silences floodgate's misconfiguration warnings (untrusted proxy headers, a trust-everything proxy
   * setting, no client address) for the whole process, as `clientIp({ validate: false })` does for one key
   * function. Default true.
   */
  validate?: boolean;
}

/** A request hook, as validated (the adapter's request and response). */
// biome-ignore lint/suspicious/noExplicitAny: each adapter passes its own objects
export type RequestHook = (req: any, res: any) => MaybePromise<boolean>;

/** A `priority` hook, as validated. */
// biome-ignore lint/suspicious/noExplicitAny: each adapter passes its own objects
export type PriorityHook = (req: any, res: any) => Priority;

/** Which granted requests give their permits back after the response. */
export interface RefundRule {
  readonly successful: boolean;
  readonly failed: boolean;
  readonly wasSuccessful: RequestHook | undefined;
}

/**
 * Every option name of {@link RateLimitingOptions}: any other is refused, with the closest of these named.
 * Add a name here with its option.
 */
export const RATE_LIMITING_OPTION_NAMES: readonly string[] = [
  'global',
  'policies',
  'onRejected',
  'status',
  'body',
  'headers',
  'partitionKeySecret',
  'dryRun',
  'skip',
  'skipSuccessfulRequests',
  'skipFailedRequests',
  'requestWasSuccessful',
  'priority',
  'validate',
  ...PER_CLIENT_OPTION_NAMES,
];

/** A validated policy. */
export interface Policy {
  readonly name: string;
  /** The limiters of the policy (a chain is flattened), in order. */
  readonly members: readonly Member[];
  readonly onRejected: OnRejected | undefined;
  readonly skip: RequestHook | undefined;
  /** Undefined when the policy sets none of the refund options (the global rule applies). */
  readonly refund: RefundRule | undefined;
  /** Undefined when the policy sets none (the global one applies). */
  readonly priority: PriorityHook | undefined;
  /** The route's cost hooks, or undefined: one permit per request. */
  readonly cost: CostHooks | undefined;
}

/** `cost`, validated. */
export interface CostHooks {
  // biome-ignore lint/suspicious/noExplicitAny: each adapter passes its own objects
  readonly estimate: (req: any, res: any) => MaybePromise<number>;
  // biome-ignore lint/suspicious/noExplicitAny: as above
  readonly actual: ((req: any, res: any) => number | undefined) | undefined;
}

/** One limiter of a route's chain: in memory (decided synchronously) or on a Redis store (one round trip). */
export type Member = Limiter;

/** Validated options. */
export interface ResolvedOptions {
  readonly global: Policy | undefined;
  readonly policies: ReadonlyMap<string, Policy>;
  readonly onRejected: OnRejected | undefined;
  readonly status: number;
  readonly body: 'text' | 'problem+json';
  readonly headers: readonly HeaderStyle[];
  readonly hasher: PartitionKeyHasher;
  readonly dryRun: boolean;
  readonly skip: RequestHook | undefined;
  readonly refund: RefundRule | undefined;
  readonly priority: PriorityHook | undefined;
}

/** The name of the global limiter in headers and metrics. */
export const GLOBAL = 'global';

/**
 * Validates `rateLimiting()` options; throws a `TypeError`/`RangeError` naming the option and the value.
 * `clientKey` makes the short form's default key (an adapter whose hooks see another object gives its own).
 */
export function resolveOptions(
  options: RateLimitingOptions | undefined,
  clientKey?: ClientKey,
): ResolvedOptions {
  const o = options ?? {};
  if (typeof o !== 'object' || o === null) {
    throw new TypeError(`rateLimiting: options must be an object; got ${describe(options)}`);
  }
  rejectUnknown('rateLimiting', o, RATE_LIMITING_OPTION_NAMES);
  const onRejected = hook('rateLimiting: onRejected', o.onRejected);
  const perClient = perClientLimiter(o, clientKey);
  const globalSpec = perClient ?? o.global;
  const global =
    globalSpec === undefined ? undefined : buildPolicy('rateLimiting: global', GLOBAL, globalSpec, false);
  const policies = new Map<string, Policy>();
  if (o.policies !== undefined) {
    if (typeof o.policies !== 'object' || o.policies === null || Array.isArray(o.policies)) {
      throw new TypeError(
        `rateLimiting: policies must be an object of named policies; got ${describe(o.policies)}`,
      );
    }
    for (const [name, spec] of Object.entries(o.policies)) {
      if (name === '' || name === GLOBAL) {
        throw new RangeError(`rateLimiting: policies may not be named ${describe(name)}`);
      }
      policies.set(name, buildPolicy(`rateLimiting: policies.${name}`, name, spec, true));
    }
  }
  const status = o.status ?? 429;
  if (!Number.isInteger(status) || status < 400 || status > 599) {
    throw new RangeError(
      `rateLimiting: status must be an HTTP error status (400–599); got ${describe(o.status)}`,
    );
  }
  let body: 'text' | 'problem+json';
  if (o.body === undefined || o.body === 'text') body = 'text';
  else if (o.body === 'problem+json' || o.body === 'problem') body = 'problem+json';
  else throw new TypeError(`rateLimiting: body must be 'text' or 'problem+json'; got ${describe(o.body)}`);
  const headers =
    o.headers === undefined ? ['draft-10' as const] : parseHeaderStyles('rateLimiting: headers', o.headers);
  if (o.dryRun !== undefined && typeof o.dryRun !== 'boolean') {
    throw new TypeError(`rateLimiting: dryRun must be a boolean; got ${describe(o.dryRun)}`);
  }
  if (o.partitionKeySecret !== undefined)
    checkSecret('rateLimiting: partitionKeySecret', o.partitionKeySecret);
  const hasher = partitionKeyHasher(
    o.partitionKeySecret === undefined ? {} : { secret: o.partitionKeySecret },
  );
  if (o.validate !== undefined && typeof o.validate !== 'boolean') {
    throw new TypeError(`rateLimiting: validate must be a boolean; got ${describe(o.validate)}`);
  }
  if (o.validate === false) silenceWarnings();
  if (global !== undefined && perClient === undefined) checkGlobal(global.members, o.shared);
  const skip = hook('rateLimiting: skip', o.skip) as RequestHook | undefined;
  const refund = refundRule('rateLimiting', o);
  const priority = hook('rateLimiting: priority', o.priority) as PriorityHook | undefined;
  return {
    global,
    policies,
    onRejected,
    status,
    body,
    headers,
    hasher,
    dryRun: o.dryRun === true,
    skip,
    refund,
    priority,
  };
}

/** The refund rule of `options`, or undefined when it sets none of the three options. */
function refundRule(where: string, options: RequestRules): RefundRule | undefined {
  const { skipSuccessfulRequests: successful, skipFailedRequests: failed, requestWasSuccessful } = options;
  if (successful === undefined && failed === undefined && requestWasSuccessful === undefined)
    return undefined;
  for (const [name, value] of [
    ['skipSuccessfulRequests', successful],
    ['skipFailedRequests', failed],
  ] as const) {
    if (value !== undefined && typeof value !== 'boolean') {
      throw new TypeError(`${where}: ${name} must be a boolean; got ${describe(value)}`);
    }
  }
  return {
    successful: successful === true,
    failed: failed === true,
    wasSuccessful: hook(`${where}: requestWasSuccessful`, requestWasSuccessful) as RequestHook | undefined,
  };
}

/**
 * Validates a policy: a limiter, or `{ limiter, onRejected?, name? }`. `named` policies take their name from
 * the `policies` key; inline ones from `name`, default `'route'`.
 */
export function buildPolicy(where: string, name: string, spec: unknown, withOptions: boolean): Policy {
  if (isHttpLimiter(spec)) {
    return {
      name,
      members: flatten(spec),
      onRejected: undefined,
      skip: undefined,
      refund: undefined,
      priority: undefined,
      cost: undefined,
    };
  }
  if (withOptions && typeof spec === 'object' && spec !== null && !Array.isArray(spec)) {
    const options = spec as RateLimitPolicyOptions;
    rejectUnknown(where, options, RATE_LIMIT_POLICY_OPTION_NAMES);
    if (!isHttpLimiter(options.limiter)) {
      throw new TypeError(
        `${where}.limiter must be a limiter (fixedWindow(...), partitioned(...), chain(...)); got ${describe(options.limiter)}`,
      );
    }
    if (options.name !== undefined && (typeof options.name !== 'string' || options.name === '')) {
      throw new TypeError(`${where}.name must be a non-empty string; got ${describe(options.name)}`);
    }
    return {
      name: options.name ?? name,
      members: flatten(options.limiter),
      onRejected: hook(`${where}.onRejected`, options.onRejected),
      skip: hook(`${where}.skip`, options.skip) as RequestHook | undefined,
      refund: refundRule(where, options),
      priority: hook(`${where}.priority`, options.priority) as PriorityHook | undefined,
      cost: costHooks(`${where}.cost`, options.cost),
    };
  }
  throw new TypeError(
    `${where} must be a limiter (fixedWindow(...), partitioned(...), chain(...))${withOptions ? ' or { limiter, onRejected? }' : ''}; got ${describe(spec)}`,
  );
}

/**
 * Whether `value` is a limiter the HTTP layer can ask: one in memory binds its partitions and has the base's
 * template methods (`MemoryLimiterBase`, or a chain); one on a remote store is asked through its store.
 */
function isHttpLimiter(value: unknown): value is Limiter {
  if (!isLimiter(value)) return false;
  if (!value.store.sync) return typeof value.store.chain === 'function';
  const memory = value as Partial<MemoryLimiter>;
  return typeof memory.bind === 'function' && typeof memory.tryAcquireFor === 'function';
}

// A chain is flattened into its members (chains in it too): the route rebuilds one chain of the global limiter
// and the policy.
function flatten(limiter: Limiter): Member[] {
  return leaves(limiter);
}

const COST_OPTION_NAMES = ['estimate', 'actual'];

function costHooks(where: string, cost: unknown): CostHooks | undefined {
  if (cost === undefined) return undefined;
  if (typeof cost !== 'object' || cost === null) {
    throw new TypeError(`${where} must be an object { estimate, actual? }; got ${describe(cost)}`);
  }
  rejectUnknown(where, cost, COST_OPTION_NAMES);
  const { estimate, actual } = cost as Partial<RouteCost>;
  if (typeof estimate !== 'function') {
    throw new TypeError(
      `${where}.estimate must be a function (req, res) => number; got ${describe(estimate)}`,
    );
  }
  if (actual !== undefined && typeof actual !== 'function') {
    throw new TypeError(`${where}.actual must be a function (req, res) => number; got ${describe(actual)}`);
  }
  return { estimate, actual };
}

function hook(where: string, value: unknown): OnRejected | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new TypeError(`${where} must be a function; got ${describe(value)}`);
  }
  return value as OnRejected | undefined;
}

/** The HttpRequest view type partitioned limiters receive. */
export type { HttpRequest };
