import { randomBytes } from 'node:crypto';
import { Lease } from '../limiters/lease.ts';
import { checkPermits } from '../limiters/options.ts';
import { DEFAULT_RANK } from '../limiters/priority.ts';
import type { LimiterSpec } from '../limiters/rate-limiter.ts';
import { Answers } from './answer.ts';
import { type Binding, type BoundMember, type Decided, ownPermits } from './binding.ts';
import type { ScriptRunner } from './client.ts';
import { Decision, type DecisionHost } from './decision.ts';
import { Dispatcher } from './dispatcher.ts';
import { unavailableAnswer } from './fallback.ts';
import { LeasePolicy } from './lease-policy.ts';
import { type LeaseHost, Leases } from './leases.ts';
import type { ResolvedOptions } from './options.ts';
import { meanwhileOf, OutageWarnings } from './outage.ts';
import { PermitLeases } from './permit-leases.ts';
import {
  type AdminOp,
  decodeNumber,
  encodeLone,
  encodeRequest,
  type MemberCall,
  type Op,
  specText,
} from './protocol.ts';
import type { SettlePart } from './refund.ts';
import type { StoreUnavailableError } from './request.ts';
import { keySlot } from './slot.ts';

/**
 * Decides bindings over Redis: encodes requests, applies the per-call deadline and `onUnavailable`, and keeps the
 * optional "blocked until" cache; the answers become leases in `Answers`.
 */
export class Engine implements DecisionHost {
  readonly dispatcher: Dispatcher;
  private readonly answers: Answers;
  /** The batches of leased limiters' keys (`leases: true`). */
  private readonly leases: Leases;
  /** The permits of leased concurrency limiters' keys. */
  private readonly permitLeases: PermitLeases;
  /** Which keys of `leases: 'auto'` limiters are hot (leased) in this process. */
  private readonly leasePolicy: LeasePolicy;
  /** Decisions answered by `onUnavailable`: Redis failed or was late, or was skipped after a failure. */
  unavailable = 0;
  /**
   * Until when decisions skip Redis after a failure, per scope ({@link scopeOf}: the node that failed, else its
   * slot): keys served by healthy nodes keep deciding on Redis. Empty while nothing failed (the common case costs
   * one size check).
   */
  private readonly skipUntil = new Map<string, number>();
  private readonly blockedUntil = new Map<string, { until: number; lease: Lease }>();
  private readonly leasePrefix = randomBytes(6).toString('base64url');
  private leaseCounter = 0;
  private readonly specTexts = new WeakMap<LimiterSpec, string>();
  /** Per spec with priority classes, its settings per ceiling (one per class below the top: a few). */
  private readonly classedTexts = new WeakMap<LimiterSpec, Map<number, string>>();
  private lastSpec: LimiterSpec | undefined;
  private lastText = '';
  /** Says once per outage that Redis is away, and once that it is back, unless `onError` is given. */
  private readonly outage: OutageWarnings;

  constructor(
    readonly runner: ScriptRunner,
    readonly options: ResolvedOptions,
  ) {
    this.dispatcher = new Dispatcher(runner, options.timeoutMs, options.coalesce);
    this.outage = new OutageWarnings(
      'floodgate/redis',
      meanwhileOf(options.onUnavailable),
      options.onError !== undefined,
    );
    this.answers = new Answers(
      options,
      (binding, op, leaseId) => this.leaseOp(binding, op, leaseId),
      (m, permits, expected, emptied) => this.refundOp(m, permits, expected, emptied),
      (parts) => this.settleOp(parts),
    );
    const clock = options.clock;
    const now = clock ? () => clock.now() : () => performance.now();
    const host: LeaseHost = {
      clock: now,
      now: () => this.now(),
      resolutionMs: clock ? 0 : 1,
      holder: this.leasePrefix,
      specOf: (spec) => this.specOf(spec),
      refund: (m, permits) => this.refundOp(m, permits, 0, false),
      encodeArgs: (args, binding, op, permits, lease, now) =>
        this.encodeArgs(args, binding, op, permits, lease, false, now),
      send: (request) => this.dispatcher.send(request),
      skipped: (binding, permits) => this.skipped(binding, permits),
      unavailable: (binding, permits, error) => {
        this.failed(binding, error);
        return this.fallback(binding, permits);
      },
      settle: (parts) => this.settleOp(parts),
      answered: (binding) => {
        if (this.outage.outage) this.outage.answered(this.scopeOf(binding));
      },
      released: (key) => this.options.onRelease(key),
    };
    this.leases = new Leases(host);
    this.permitLeases = new PermitLeases(host, options.leaseTtlMs);
    this.leasePolicy = new LeasePolicy(now, (key) => this.leases.release(key));
  }

  /** `now` as the script should read it: the test clock's value, or '' for Redis `TIME`. */
  now(): string {
    return this.options.clock ? String(this.options.clock.now()) : '';
  }

  /** Checks permits against every member (a RangeError, as in memory) and the Cluster slot rule. */
  check(binding: Binding, permits: number): void {
    const members = binding.members;
    for (let i = 0; i < members.length; i++) {
      const { spec, owner } = members[i];
      checkPermits(ownPermits(binding, i, permits), spec.algorithm.limit, spec.options.overdraw, owner);
    }
    if (this.runner.cluster && binding.members.length > 1) {
      const slot = keySlot(binding.members[0].key);
      for (const m of binding.members) {
        if (keySlot(m.key) !== slot) {
          throw new TypeError(
            `floodgate/redis: a chain's keys must share one Redis Cluster slot, but ${JSON.stringify(m.key)} and ${JSON.stringify(binding.members[0].key)} do not; give the members the same hashTag`,
          );
        }
      }
    }
  }

  /**
   * One decision. `op` `'t'` charges a rejection when `countRejected`; `'w'` (a queued attempt) never does.
   * `blockedFirst` says local waiters are ahead of this request (oldest-first fairness).
   */
  decide(
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    reason: string,
    blockedFirst = false,
  ): Promise<Decided> {
    return this.start(binding, op, permits, reason, blockedFirst, false) as Promise<Decided>;
  }

  /**
   * `decide`, answered with the lease itself (marked when `onUnavailable` gave it): what `tryAcquire` returns,
   * one promise per decision.
   */
  decideLease(binding: Binding, permits: number, reason: string): Promise<Lease> {
    return this.start(binding, 't', permits, reason, false, true) as Promise<Lease>;
  }

  private start(
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    reason: string,
    blockedFirst: boolean,
    asLease: boolean,
  ): Promise<Decided | Lease> {
    // A lone leased member decides from its batch (a request behind local waiters asks Redis);
    // with `leases: 'auto'`, while this process decides its key often. A probe (0 permits) asks Redis.
    if (binding.members.length === 1 && !blockedFirst && permits > 0) {
      const m = binding.members[0];
      // An overdraw (more than the limit) is decided by Redis, whose state says whether the whole limit is free.
      const leased = m.leased === true || (m.leased === 'auto' && this.leasePolicy.leased(m.key));
      if (leased && permits <= m.spec.algorithm.limit) {
        if (!m.spec.algorithm.timeBased)
          return this.permitLeases.decide(binding, op, permits, reason, asLease);
        return this.leases.decide(binding, op, permits, reason, asLease);
      }
    }
    // A chain whose members are all leased windows or buckets (with 'auto', each key hot here, chain decisions
    // counted too): from their batches when each holds the permits, else one round trip that takes batches too.
    const leasedChain =
      binding.chain &&
      !blockedFirst &&
      permits > 0 &&
      binding.ones === undefined &&
      this.leasedChain(binding, permits);
    if (leasedChain) return this.leasedChainDecision(binding, op, permits, reason, asLease, 0);
    // A probe of such a chain gives back what the batches hold first (and takes nothing): answered exactly.
    const probe = binding.chain && permits === 0 && binding.members.every((_m, i) => leasable(binding, i, 0));
    return this.remote(binding, op, permits, reason, blockedFirst, asLease, probe);
  }

  /**
   * A chain of leased members: from their batches when each holds the permits; else, while a member's take is in
   * flight (a batch ran out this tick), again once it is answered, so that the decisions of that tick do not each
   * go to Redis (a few times at most: takes answered meanwhile may be spent by others first); else on Redis.
   */
  private leasedChainDecision(
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    reason: string,
    asLease: boolean,
    waited: number,
  ): Promise<Decided | Lease> {
    const local = this.leases.chain(binding, permits, asLease);
    if (local !== undefined) return Promise.resolve(local);
    if (waited < 3 && this.leases.takeInFlight(binding)) {
      return new Promise((resolve) =>
        this.leases.afterTake(binding, () =>
          resolve(this.leasedChainDecision(binding, op, permits, reason, asLease, waited + 1)),
        ),
      );
    }
    return this.remote(binding, op, permits, reason, false, asLease, true);
  }

  /**
   * A decision on Redis (or the blocked cache, or `onUnavailable` while its node is skipped). With `batches`
   * (a leased chain, or a probe of one), the call gives back what its members' batches hold and takes new ones
   * ({@link Leases.chainCall}).
   */
  private remote(
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    reason: string,
    blockedFirst: boolean,
    asLease: boolean,
    batches: boolean,
  ): Promise<Decided | Lease> {
    const cacheKey = this.options.cacheBlocked ? binding.members.map((m) => m.key).join('\n') : '';
    if (cacheKey !== '') {
      const hit = this.blockedUntil.get(cacheKey);
      const left = hit ? hit.until - performance.now() : 0;
      if (hit && left > 0) {
        const l = hit.lease;
        const lease = Lease.rejected(l.reason ?? 'limit', {
          retryAfterMs: left,
          limit: l.limit,
          remaining: 0,
          source: l.source,
        });
        return Promise.resolve(asLease ? lease : { lease, blocked: 0, local: true });
      }
      if (hit) this.blockedUntil.delete(cacheKey);
    }
    const skipped = this.skipped(binding, permits);
    if (skipped !== undefined) {
      return Promise.resolve(asLease ? skipped : { lease: skipped, blocked: -1, local: true });
    }
    let leaseId = '';
    for (const m of binding.members) {
      if (!m.spec.algorithm.timeBased) {
        leaseId = `${permits}:${this.leasePrefix}.${(this.leaseCounter++).toString(36)}`;
        break;
      }
    }
    return new Promise((resolve, reject) => {
      const decision = Decision.of({
        host: this,
        binding,
        op,
        permits,
        reason,
        leaseId,
        blockedFirst,
        now: this.now(),
        cacheKey,
        asLease,
        resolve,
        reject,
      });
      const around = batches ? this.leases.chainCall(binding, permits) : undefined;
      if (around === undefined) this.dispatcher.send(decision);
      else this.dispatcher.sendAll([...around.before, decision, ...around.after]);
    });
  }

  /**
   * Whether every member of a chain is decided from batches: leased windows or buckets, a `leases: 'auto'`
   * member while its key is hot here (this decision counted for each).
   */
  private leasedChain(binding: Binding, permits: number): boolean {
    const members = binding.members;
    let leased = true;
    for (let i = 0; i < members.length; i++) {
      if (!leasable(binding, i, permits)) return false;
      const m = members[i];
      if (m.leased === 'auto' && !this.leasePolicy.leased(m.key)) leased = false;
    }
    return leased;
  }

  /** `onUnavailable`'s answer while `binding`'s node is skipped after a failure, else undefined. */
  private skipped(binding: Binding, permits: number): Lease | undefined {
    // The scope and the clock are read only while some decisions skip Redis after a failure.
    if (this.skipUntil.size === 0) return undefined;
    const scope = this.scopeOf(binding);
    const until = this.skipUntil.get(scope);
    if (until === undefined) return undefined;
    if (performance.now() < until) return this.fallback(binding, permits);
    this.skipUntil.delete(scope);
    return undefined;
  }

  /** Permits available now in each member (read-only). */
  async peek(binding: Binding): Promise<number[]> {
    const args: string[] = [];
    this.encodeArgs(args, binding, 'p', 1, '', false, this.now());
    const reply = await this.dispatcher.request(
      binding.members.map((m) => m.key),
      args,
    );
    const available = reply.split(',').map((v) => decodeNumber(v) ?? 0);
    // What this process holds free in its batches is counted in Redis as taken, yet still available here.
    for (let i = 0; i < binding.members.length; i++) {
      const m = binding.members[i];
      if (!m.leased) continue;
      const at = this.options.clock ? this.options.clock.now() : performance.now();
      available[i] += this.leases.free(m.key, at) + this.permitLeases.free(m.key, at);
    }
    return available;
  }

  /**
   * One key administered (see `lua/admin.ts`): one round trip, answered with the script's reply. A rejection
   * this process kept for the key (`cacheBlocked`) is forgotten, as the key's state just changed.
   */
  async admin(m: BoundMember, op: AdminOp, permits: number, arg: string): Promise<string> {
    const args: string[] = [];
    const binding: Binding = { members: [m], partKey: m.partKey, chain: false };
    this.encodeArgs(args, binding, op, permits, arg, false, this.now());
    const reply = await this.dispatcher.request([m.key], args);
    if (op !== 'a' && this.blockedUntil.size > 0) {
      for (const key of this.blockedUntil.keys())
        if (key.split('\n').includes(m.key)) this.blockedUntil.delete(key);
    }
    return reply;
  }

  /** Returns a concurrency lease's permits, or renews it; a failure is left to the lease TTL. */
  leaseOp(binding: Binding, op: 'x' | 'n', leaseId: string): void {
    const args: string[] = [];
    this.encodeArgs(args, binding, op, 0, leaseId, false, this.now());
    this.dispatcher
      .request(
        binding.members.map((m) => m.key),
        args,
      )
      .catch(() => {});
  }

  /** Redis answered `decision`: its lease, and the blocked cache (for the dispatcher, as its DecisionHost). */
  answered(d: Decision, reply: string): Decided {
    if (this.outage.outage) this.outage.answered(this.scopeOf(d.binding));
    const decided = this.answers.toLease(d.binding, reply.split(','), d.op, d.permits, d.reason, d.leaseId);
    if (d.cacheKey === '') return decided;
    // An administrative lock (a trailing 'L') is not kept here: an unlock in another process must reach this one
    // at its next request. A lockout()'s own lockout is, like any rejection: an attacker on it costs Redis nothing.
    if (!decided.lease.granted && decided.lease.retryAfterMs! > 0 && d.permits > 0 && !reply.endsWith(',L')) {
      this.blockedUntil.set(d.cacheKey, {
        until: performance.now() + decided.lease.retryAfterMs!,
        lease: decided.lease,
      });
      if (this.blockedUntil.size > 10_000) this.blockedUntil.delete(this.blockedUntil.keys().next().value!);
    }
    return decided;
  }

  /**
   * Redis answered `decision` after its deadline (`onUnavailable` answered it): a granted concurrency
   * permit nobody holds is released now, not left to `leaseTtlMs` (a time-based permit is spent).
   */
  answeredLate(d: Decision, reply: string): void {
    if (reply.charCodeAt(0) !== 49 /* '1' */ || d.leaseId === '') return;
    this.leaseOp(d.binding, 'x', d.leaseId);
    for (const m of d.binding.members) if (!m.spec.algorithm.timeBased) this.options.onRelease(m.key);
  }

  /** Redis failed or was late for `decision`: skip it for a while; `onUnavailable` answers. */
  unanswered(d: Decision, error: StoreUnavailableError): Decided {
    this.failed(d.binding, error);
    return { lease: this.fallback(d.binding, d.permits), blocked: -1, local: true };
  }

  /** Appends a request's arguments (its keys are its members' keys, in order). */
  encodeArgs(
    args: string[],
    binding: Binding,
    op: Op,
    permits: number,
    leaseId: string,
    blockedFirst: boolean,
    now: string,
  ): void {
    const members = binding.members;
    // The common request (a lone member, nothing but its settings, a try or a queued attempt): no MemberCall to
    // build. Any other op takes the general encoding below.
    if (
      members.length === 1 &&
      !blockedFirst &&
      leaseId === '' &&
      members[0].origin === '' &&
      encodeLone(args, op, permits, now, this.specOf(members[0].spec, binding.rank))
    ) {
      return;
    }
    const calls: MemberCall[] = new Array(members.length);
    for (let i = 0; i < members.length; i++) {
      const m = members[i];
      calls[i] = {
        key: m.key,
        // `:1`: one permit per request (a requests member of a chain mixing units; see `lua/general.ts`).
        spec:
          binding.ones?.[i] === true
            ? `${this.specOf(m.spec, binding.rank)}:1`
            : this.specOf(m.spec, binding.rank),
        origin: m.origin,
        blocked: blockedFirst && i === 0,
        lease: leaseId,
      };
    }
    encodeRequest(args, op, permits, now, calls);
  }

  /**
   * The settings string of a limiter spec, built once; with priority classes, once per class below the top
   * (whose ceiling is below the limit), `rank` being the request's class (undefined: the default class).
   */
  specOf(spec: LimiterSpec, rank?: number): string {
    if (spec.algorithm.ceiling !== undefined) {
      // No class said: the default class, which the shares of the classes above it bind too.
      const ceiling = spec.algorithm.ceiling(rank ?? DEFAULT_RANK);
      if (ceiling < spec.algorithm.limit) return this.classedSpecOf(spec, ceiling);
    }
    if (spec === this.lastSpec) return this.lastText;
    let text = this.specTexts.get(spec);
    if (text === undefined) {
      const o = this.options;
      text = specText(spec.algorithm, spec.options, o.ttlPadMs, o.leaseTtlMs);
      this.specTexts.set(spec, text);
    }
    // Most decisions in a row are for the same limiter: spared a WeakMap lookup.
    this.lastSpec = spec;
    this.lastText = text;
    return text;
  }

  /** The settings string of a spec with priority classes, for a class whose share stops at `ceiling`. */
  private classedSpecOf(spec: LimiterSpec, ceiling: number): string {
    let texts = this.classedTexts.get(spec);
    if (texts === undefined) {
      texts = new Map();
      this.classedTexts.set(spec, texts);
    }
    let text = texts.get(ceiling);
    if (text === undefined) {
      const o = this.options;
      text = specText(spec.algorithm, spec.options, o.ttlPadMs, o.leaseTtlMs, ceiling);
      texts.set(ceiling, text);
    }
    return text;
  }

  /** Decisions in the scope of `binding` skip Redis for `retryIntervalMs`, then try it again. */
  private failed(binding: Binding, error: StoreUnavailableError): void {
    if (error.skip) {
      const scope = this.scopeOf(binding);
      this.skipUntil.set(scope, performance.now() + this.options.retryIntervalMs);
      this.outage.failed(scope, error);
    }
    this.options.onError?.(error);
  }

  /**
   * What a failure of `binding`'s call says is failing: the node serving its slot as the client's slot map says
   * now (a failover moves the slot to a node that is not skipped), else the slot; without Cluster, the one node.
   */
  private scopeOf(binding: Binding): string {
    if (!this.runner.cluster) return '';
    const slot = keySlot(binding.members[0].key);
    return this.runner.nodeOf?.(slot) ?? `slot ${slot}`;
  }

  /** The `onUnavailable` answer (see {@link unavailableAnswer}), counted in `unavailable`. */
  fallback(binding: Binding, permits: number): Lease {
    this.unavailable++;
    return unavailableAnswer(this.options, binding, permits);
  }

  /** Gives a grant's permits back (op `r`); a failure leaves them spent, as if never refunded. */
  private refundOp(m: BoundMember, permits: number, expectedResetMs: number, emptied: boolean): void {
    const args: string[] = [];
    const binding: Binding = { members: [m], partKey: undefined, chain: false };
    // 'z': the grant left no permits (how a lockout knows the grant that started a lockout).
    const lease = `${Math.round(expectedResetMs)}${emptied ? 'z' : ''}`;
    this.encodeArgs(args, binding, 'r', permits, lease, false, this.now());
    this.dispatcher.request([m.key], args).catch(() => {});
  }

  /**
   * Settles a lease, or a chain's members together, in one request (op `s`): each member's lease field carries
   * `delta:expectedResetMs`. A failure leaves the estimates charged, as if never settled.
   */
  private settleOp(parts: readonly SettlePart[]): void {
    const args: string[] = [];
    const calls: MemberCall[] = parts.map(({ member, delta, expectedResetMs }) => ({
      key: member.key,
      spec: this.specOf(member.spec),
      origin: member.origin,
      blocked: false,
      lease: `${delta}:${Math.round(expectedResetMs)}`,
    }));
    encodeRequest(args, 's', 0, this.now(), calls);
    this.dispatcher
      .request(
        parts.map((p) => p.member.key),
        args,
      )
      .catch(() => {});
  }
}

/**
 * Whether member `i` of `binding` may decide `permits` from this process's batch: leased (`true`, or `'auto'`
 * while its key is hot here), time-based, without priority classes (a batch is taken for the whole limit), and
 * not an overdraw (more than the limit goes to Redis).
 */
function leasable(binding: Binding, i: number, permits: number): boolean {
  const m = binding.members[i];
  return (
    m.leased !== false &&
    m.spec.algorithm.timeBased &&
    m.spec.algorithm.ceiling === undefined &&
    ownPermits(binding, i, permits) <= m.spec.algorithm.limit
  );
}
