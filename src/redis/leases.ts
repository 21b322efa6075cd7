import { Lease } from '../limiters/lease.ts';
import { BATCH_TARGET_MS, Batch } from './batch.ts';
import type { Binding, BoundMember, Decided } from './binding.ts';
import { encodeRequest, type MemberCall } from './protocol.ts';
import { RedisChainLease, RedisRefundableLease, type SettleSender } from './refund.ts';
import type { Request, StoreUnavailableError } from './request.ts';

/** What the leases need of the engine (the engine, without importing it). */
export interface LeaseHost {
  /** The store's clock: the test clock, or `performance.now()`. */
  clock(): number;
  /** `now` as the script should read it ('' is Redis's own `TIME`). */
  now(): string;
  /**
   * How far behind the real time the script's clock may be: Redis `TIME` read in whole milliseconds (1), or the
   * test clock's exact value (0). A batch ends this much before the window end the script answered.
   */
  readonly resolutionMs: number;
  /** This process's name among a token bucket's holders (one per store). */
  readonly holder: string;
  /** The settings string of a limiter spec (`Engine.specOf`). */
  specOf(spec: BoundMember['spec']): string;
  /** Refunds a token bucket's leased grant to Redis (op `r`): a bucket's batch never grows past its take. */
  refund(member: BoundMember, permits: number): void;
  /** Appends a request's arguments (`Engine.encodeArgs`). */
  encodeArgs(
    args: string[],
    binding: Binding,
    op: 'l' | 'g',
    permits: number,
    lease: string,
    now: string,
  ): void;
  /** Sends one request through the dispatcher (coalesced with the tick's others). */
  send(request: Request): void;
  /** `onUnavailable`'s answer while `binding`'s node is skipped after a failure, else undefined. */
  skipped(binding: Binding, permits: number): Lease | undefined;
  /** Redis failed or was late for `binding`: skip it for a while, and answer `permits` by `onUnavailable`. */
  unavailable(binding: Binding, permits: number, error: StoreUnavailableError): Lease;
  /** Settles leased grants as strict ones are (op `s`): Redis counted the batch, so the difference goes there. */
  readonly settle: SettleSender;
  /** Redis answered for `binding`: the end of an outage, if one was under way (the recovery warning). */
  answered(binding: Binding): void;
  /** A concurrency permit came back on `key` here: its local waiters may ask again. */
  released(key: string): void;
}

/** A decision waiting for its key's take to come back. */
export interface Waiter {
  permits: number;
  op: 't' | 'w';
  reason: string;
  asLease: boolean;
  resolve: (value: Decided | Lease) => void;
}

/** One leased key in this process: its batch, and the decisions waiting for the take in flight. */
interface Entry {
  batch: Batch;
  member: BoundMember;
  binding: Binding;
  /**
   * A token bucket's holders key (see `lua/bucket-lease.ts`), undefined for a window: a bucket's take and
   * give-back name it too.
   */
  holders: string | undefined;
  /** Decisions waiting for the take in flight (undefined: none in flight). */
  waiting: Waiter[] | undefined;
  /** Chain decisions to make again once the take in flight is answered (or failed). */
  chains?: (() => void)[] | undefined;
}

/** Keys held at most; beyond, the oldest entry is given back and dropped. */
const MAX_ENTRIES = 10_000;

/**
 * Leased decisions (`leases: true`): per key a {@link Batch} of permits taken from Redis in one command and
 * spent here, synchronously, until its window (segment) ends; a take when it runs out (one in flight per key,
 * the decisions meanwhile wait for it); cached denials; unspent permits given back when demand falls. See
 * docs/architecture.md (Leased decisions) for the protocol and its bound.
 */
export class Leases {
  private readonly entries = new Map<string, Entry>();
  private sweeper: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly host: LeaseHost) {}

  /** Decides a lone leased member: from its batch now, or after a take. */
  decide(
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    reason: string,
    asLease: boolean,
  ): Promise<Decided | Lease> {
    const entry = this.entryOf(binding);
    const w: Waiter = { permits, op, reason, asLease, resolve: noop };
    if (entry.waiting !== undefined) {
      return new Promise((resolve) => {
        w.resolve = resolve;
        entry.waiting!.push(w);
      });
    }
    const now = this.host.clock();
    const answer = this.local(entry, w, now);
    if (answer !== undefined) return Promise.resolve(answer);
    const skipped = this.host.skipped(binding, permits);
    if (skipped !== undefined)
      return Promise.resolve(asLease ? skipped : { lease: skipped, blocked: -1, local: true });
    return new Promise((resolve) => {
      w.resolve = resolve;
      entry.waiting = [w];
      this.take(entry, permits, now);
    });
  }

  /** The entry of `binding`'s lone member, made (or renewed, if its tier changed) as needed. */
  private entryOf(binding: Binding): Entry {
    const m = binding.members[0];
    let entry = this.entries.get(m.key);
    if (entry === undefined) {
      if (this.entries.size >= MAX_ENTRIES) this.evictOldest();
      entry = {
        batch: new Batch(m.spec.algorithm.limit),
        member: m,
        binding,
        holders: holdersKey(m),
        waiting: undefined,
      };
      this.entries.set(m.key, entry);
    } else if (entry.member.spec !== m.spec) {
      // A tier changed: the batch was taken under other settings.
      this.giveBack(entry, entry.batch.takeAll());
      entry.batch = new Batch(m.spec.algorithm.limit);
      entry.member = m;
      entry.binding = binding;
      entry.holders = holdersKey(m);
    }
    return entry;
  }

  /** The answer from the batch alone (a grant, or a cached denial), or undefined when Redis must be asked. */
  private local(entry: Entry, w: Waiter, now: number): Decided | Lease | undefined {
    const batch = entry.batch;
    const need = w.permits === 0 ? 1 : w.permits;
    if (batch.denied(now, need)) return this.rejected(entry, w, batch.deniedUntil - now, now);
    if (w.permits === 0) {
      // A probe: whether a permit is here or would be (as a try of 0 permits answers), taking none.
      if (batch.permits >= need && now < batch.endsAt) return this.granted(entry, w, 0, now);
      return undefined;
    }
    if (!batch.spend(w.permits, now)) return undefined;
    this.startSweeper();
    return this.granted(entry, w, w.permits, now);
  }

  /**
   * A chain decided from its members' batches, all or nothing: when every member's key has a live batch here
   * (taken by that member's own decisions, no take in flight, no cached rejection for `permits`) holding
   * `permits`, each spends them and the chain is granted as Redis would grant it; else undefined, nothing is
   * spent, and the chain asks Redis. It never over-admits: each permit spent was counted by Redis in its member's
   * window (segment, bucket) when its batch was taken.
   */
  chain(binding: Binding, permits: number, asLease: boolean): Decided | Lease | undefined {
    const members = binding.members;
    const now = this.host.clock();
    const entries: Entry[] = new Array(members.length);
    for (let i = 0; i < members.length; i++) {
      const m = members[i];
      const entry = this.entries.get(m.key);
      if (
        entry === undefined ||
        entry.member.spec !== m.spec ||
        entry.waiting !== undefined ||
        now >= entry.batch.endsAt ||
        entry.batch.permits < permits ||
        entry.batch.denied(now, permits)
      ) {
        return undefined;
      }
      // One key twice in a chain spends twice from one batch: Redis decides it.
      for (let j = 0; j < i; j++) if (entries[j] === entry) return undefined;
      entries[i] = entry;
    }
    const leases: Lease[] = new Array(entries.length);
    let decisive = 0;
    for (let i = 0; i < entries.length; i++) {
      entries[i].batch.spend(permits, now);
      leases[i] = this.grant(entries[i], permits, now);
      // As the script's answer: the member with the least left shows its fields (the first, on a tie).
      if (leases[i].remaining < leases[decisive].remaining) decisive = i;
    }
    this.startSweeper();
    const lease = new RedisChainLease(leases[decisive], leases, this.host.settle);
    return asLease ? lease : { lease, blocked: -1, local: false };
  }

  /**
   * What a chain that asks Redis sends in its call beside its decision (undefined: nothing). Before it, what its
   * members' batches hold, given back: Redis decides the chain on every permit this process has not spent, as
   * without leases (a batch's permits are counted there as taken). After it, a take for each member (none in
   * flight, no rejection cached for that count), sized to the member's demand as its own decisions' takes are,
   * so that the chain's next decisions are made here. A take answered after the chain was rejected holds a batch
   * no chain spends: the sweeper gives it back once unused, as any batch.
   */
  chainCall(binding: Binding, permits: number): { before: Request[]; after: Request[] } | undefined {
    const now = this.host.clock();
    const before: Request[] = [];
    const after: Request[] = [];
    const members = binding.members;
    for (let i = 0; i < members.length; i++) {
      const m = members[i];
      // One key twice in a chain: given back and taken once.
      let twice = false;
      for (let j = 0; j < i; j++) if (members[j].key === m.key) twice = true;
      if (twice) continue;
      // A probe takes nothing, and makes no entry: what the batches hold goes back, so that it answers exactly.
      const entry =
        permits === 0
          ? this.entries.get(m.key)
          : this.entryOf({ members: [m], partKey: m.partKey, chain: false });
      if (entry === undefined) continue;
      entry.batch.demanded(permits);
      if (entry.waiting !== undefined) continue;
      const back = entry.batch.takeAll();
      if (back !== undefined) before.push(this.giveBackRequest(entry, back));
      if (permits === 0 || entry.batch.denied(now, permits)) continue;
      entry.waiting = [];
      after.push(this.takeRequest(entry, permits, now));
    }
    return before.length + after.length === 0 ? undefined : { before, after };
  }

  /** Whether the take of a member of `binding` is in flight. */
  takeInFlight(binding: Binding): boolean {
    return this.inFlight(binding) !== undefined;
  }

  private inFlight(binding: Binding): Entry | undefined {
    for (const m of binding.members) {
      const entry = this.entries.get(m.key);
      if (entry?.waiting !== undefined) return entry;
    }
    return undefined;
  }

  /** Runs `then` once the take in flight for a member of `binding` ({@link takeInFlight}) is answered or failed. */
  afterTake(binding: Binding, then: () => void): void {
    const entry = this.inFlight(binding);
    if (entry === undefined) then();
    else if (entry.chains === undefined) entry.chains = [then];
    else entry.chains.push(then);
  }

  /** The chain decisions that waited for `entry`'s take, made again now. */
  private chainsAfter(entry: Entry): void {
    const chains = entry.chains;
    if (chains === undefined) return;
    entry.chains = undefined;
    for (const then of chains) then();
  }

  private granted(entry: Entry, w: Waiter, permits: number, now: number): Decided | Lease {
    const lease = this.grant(entry, permits, now);
    return w.asLease ? lease : { lease, blocked: -1, local: false };
  }

  /** A grant of `permits` (0: a probe) spent from `entry`'s batch: refundable into it while it lives. */
  private grant(entry: Entry, permits: number, now: number): Lease {
    const m = entry.member;
    const batch = entry.batch;
    const limit = m.spec.algorithm.limit;
    const resetAfterMs = Math.max(0, batch.resetAt - now);
    let lease: Lease;
    if (permits === 0) {
      lease = Lease.granted({
        limit,
        remaining: batch.remaining(),
        resetAfterMs,
        source: m.owner,
        key: m.partKey,
      });
    } else {
      m.owner.granted++;
      const mark = batch.mark;
      lease = new RedisRefundableLease(
        limit,
        batch.remaining(),
        resetAfterMs,
        m.owner,
        m.partKey,
        permits,
        now,
        this.host.clock,
        (n) => this.refund(entry, n, mark),
        m,
        this.host.settle,
      );
    }
    return lease;
  }

  private rejected(entry: Entry, w: Waiter, retryAfterMs: number, now: number): Decided | Lease {
    const m = entry.member;
    if (w.permits > 0 && w.op === 't') m.owner.rejected++;
    const lease = Lease.rejected(w.reason, {
      retryAfterMs,
      limit: m.spec.algorithm.limit,
      remaining: entry.batch.remaining(),
      resetAfterMs: Math.max(0, entry.batch.resetAt - now),
      source: m.owner,
      key: m.partKey,
    });
    // Not `local`: it is Redis's answer (remembered), so a queued request waits for its retry time.
    return w.asLease ? lease : { lease, blocked: 0, local: false };
  }

  /** Permits this process holds free for `key` (Redis counts them as taken): what `statistics` adds back. */
  free(key: string, now: number): number {
    const batch = this.entries.get(key)?.batch;
    return batch !== undefined && now < batch.endsAt ? batch.permits : 0;
  }

  /** Sends a take for `need` permits (and as many more as the demand says), sent at `now`. */
  private take(entry: Entry, need: number, now: number): void {
    this.host.send(this.takeRequest(entry, need, now));
  }

  /** The request of a take for `need` permits (see {@link take}), to send at `now`. */
  private takeRequest(entry: Entry, need: number, now: number): Request {
    const want = entry.batch.want(need === 0 ? 1 : need, now);
    const args: string[] = [];
    const key = entry.member.key;
    const holders = entry.holders;
    if (holders === undefined) {
      this.host.encodeArgs(args, entry.binding, 'l', want, String(need === 0 ? 1 : need), this.host.now());
    } else {
      // A bucket's batch goes back with the take (its record then counts this take's grant alone).
      this.bucketArgs(args, entry, holders, 'l', want, String(need), entry.batch.takeAll()?.permits ?? 0);
    }
    let answered = false;
    return {
      key,
      keysTo: (out) => {
        out.push(key);
        if (holders !== undefined) out.push(holders);
      },
      argsTo: (out) => {
        for (const a of args) out.push(a);
      },
      answer: (reply) => {
        answered = true;
        this.host.answered(entry.binding);
        this.taken(entry, reply, now, need === 0 ? 1 : need);
      },
      fail: (error) => {
        if (answered) return;
        answered = true;
        this.failed(entry, error);
      },
      // Answered after its deadline (onUnavailable answered): what it took was never spent here. (A bucket's is
      // forfeit: its record may already count a later take, which a give-back would discount.)
      late: (reply) => {
        const f = reply.split(',');
        if (f[0] === '1' && holders === undefined)
          this.giveBack(entry, { permits: Number(f[1]), mark: f[4] });
      },
    };
  }

  /** The take for `need` permits came back: fill the batch and serve the waiting decisions in order. */
  private taken(entry: Entry, reply: string, sentAt: number, need: number): void {
    const f = reply.split(',');
    const batch = entry.batch;
    const now = this.host.clock();
    if (f[0] === '1') {
      this.giveBack(
        entry,
        batch.filled(
          Number(f[1]),
          f[4],
          Number(f[5]) - this.host.resolutionMs,
          Number(f[3] || 0),
          Number(f[2]),
          sentAt,
        ),
      );
      this.startSweeper();
    } else {
      // Rejected for the count the take needed (its first waiter's, or a chain's).
      batch.rejected(Number(f[2]), now, need);
      // What Redis said is left for the fleet, and when the key is full again: the rejection's fields.
      batch.fleet = Number(f[4]);
      if (f[5] !== '') batch.resetAt = now + Number(f[5]);
    }
    const waiting = entry.waiting ?? [];
    entry.waiting = undefined;
    for (let i = 0; i < waiting.length; i++) {
      const w = waiting[i];
      const answer = this.local(entry, w, now);
      if (answer !== undefined) {
        w.resolve(answer);
        continue;
      }
      // The batch ran out (or was void when it came): the rest wait for the next take.
      entry.waiting = waiting.slice(i);
      this.take(entry, w.permits, now);
      break;
    }
    this.chainsAfter(entry);
  }

  /** The take failed or was late: every waiting decision gets `onUnavailable`'s answer. */
  private failed(entry: Entry, error: StoreUnavailableError): void {
    failWaiting(this.host, entry, error);
    this.chainsAfter(entry);
  }

  /** A local grant refunded: into the batch while it is live, else given back to its window (segment). */
  private refund(entry: Entry, permits: number, mark: string): void {
    if (entry.holders !== undefined) {
      this.host.refund(entry.member, permits);
      return;
    }
    if (
      this.entries.get(entry.member.key) === entry &&
      entry.batch.refund(permits, mark, this.host.clock())
    ) {
      return;
    }
    this.giveBack(entry, { permits, mark });
  }

  private giveBack(entry: Entry, back: { permits: number; mark: string } | undefined): void {
    if (back === undefined || back.permits <= 0) return;
    this.host.send(this.giveBackRequest(entry, back));
  }

  /** The request that gives `back` to Redis (see {@link giveBack}). */
  private giveBackRequest(entry: Entry, back: { permits: number; mark: string }): Request {
    const args: string[] = [];
    const key = entry.member.key;
    const holders = entry.holders;
    if (holders === undefined) {
      this.host.encodeArgs(args, entry.binding, 'g', back.permits, back.mark, this.host.now());
    } else {
      this.bucketArgs(args, entry, holders, 'g', back.permits, '0', back.permits);
    }
    // A failure leaves the permits counted until their window (segment) leaves, a bucket's until its record
    // expires: never an over-admission.
    return {
      key,
      keysTo: (out) => {
        out.push(key);
        if (holders !== undefined) out.push(holders);
      },
      argsTo: (out) => {
        for (const a of args) out.push(a);
      },
      answer: noop,
      fail: noop,
    };
  }

  /** A bucket's take or give-back: the bucket (`need`), then its holders (`holder:back`). */
  private bucketArgs(
    args: string[],
    entry: Entry,
    holders: string,
    op: 'l' | 'g',
    permits: number,
    need: string,
    back: number,
  ): void {
    const m = entry.member;
    const spec = this.host.specOf(m.spec);
    const calls: MemberCall[] = [
      { key: m.key, spec, origin: m.origin, blocked: false, lease: need },
      { key: holders, spec, origin: '', blocked: false, lease: `${this.host.holder}:${back}` },
    ];
    encodeRequest(args, op, permits, this.host.now(), calls);
  }

  /** Every `BATCH_TARGET_MS` while a batch holds permits: those unused since the last sweep go back. */
  private startSweeper(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => this.sweep(), BATCH_TARGET_MS);
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = this.host.clock();
    let holding = false;
    for (const [key, entry] of this.entries) {
      this.giveBack(entry, entry.batch.idle(now));
      if (entry.batch.permits > 0) holding = true;
      else if (entry.waiting === undefined && entry.batch.empty(now)) this.entries.delete(key);
    }
    if (!holding && this.sweeper !== undefined) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  /**
   * `key` went cold (`leases: 'auto'`): its unspent permits go back and its entry is dropped, so its decisions
   * are exact again. False while a take is in flight (its waiters need the entry): the key stays leased for now.
   */
  release(key: string): boolean {
    const entry = this.entries.get(key);
    if (entry === undefined) return true;
    if (entry.waiting !== undefined) return false;
    this.giveBack(entry, entry.batch.takeAll());
    this.entries.delete(key);
    return true;
  }

  private evictOldest(): void {
    for (const [key, entry] of this.entries) {
      if (entry.waiting !== undefined) continue;
      this.giveBack(entry, entry.batch.takeAll());
      this.entries.delete(key);
      return;
    }
  }
}

export function noop(): void {}

function isBucket(m: BoundMember): boolean {
  const twin = m.spec.algorithm.remote?.twin;
  return twin === 'tb' || twin === 'tc';
}

/**
 * A token bucket's holders key: the member's key with a newline before its hash tag, so in the same Cluster slot
 * and never a member's key (those have the store's prefix, which has no braces, right before the tag).
 */
function holdersKey(m: BoundMember): string | undefined {
  if (!isBucket(m)) return undefined;
  const i = m.key.indexOf('{');
  return `${m.key.slice(0, i)}\n${m.key.slice(i)}`;
}

/**
 * A take failed or was late: every decision waiting on `entry` gets `onUnavailable`'s answer (batches and
 * permit leases alike).
 */
export function failWaiting(
  host: LeaseHost,
  entry: { readonly binding: Binding; waiting: Waiter[] | undefined },
  error: StoreUnavailableError,
): void {
  const waiting = entry.waiting ?? [];
  entry.waiting = undefined;
  for (const w of waiting) {
    const lease = host.unavailable(entry.binding, w.permits, error);
    w.resolve(w.asLease ? lease : { lease, blocked: -1, local: true });
  }
}
