import { HeldLease, Lease } from '../limiters/lease.ts';
import { BATCH_TARGET_MS } from './batch.ts';
import type { Binding, Decided } from './binding.ts';
import { failWaiting, type LeaseHost, noop, type Waiter } from './leases.ts';
import type { StoreUnavailableError } from './request.ts';

/** One leased concurrency key in this process: the permits its entry in Redis holds, and those in use here. */
interface Entry {
  binding: Binding;
  /** What this process's entry in Redis holds, as it last wrote it: in use here, or free to grant. */
  held: number;
  /** Granted here and not released yet. */
  inUse: number;
  /** This process's clock when the entry may have lapsed in Redis (its take or renewal was sent a lease TTL ago). */
  endsAt: number;
  /** When to renew the entry (a third of the TTL after it was written). */
  renewAt: number;
  /** Permits Redis had left for the fleet at the last take. */
  fleet: number;
  /** A permit was granted since the last sweep. */
  busy: boolean;
  /** Decisions waiting for the take in flight (undefined: none in flight). */
  waiting: Waiter[] | undefined;
}

/**
 * Leased concurrency permits (`leases: true` on `concurrency(...)`): per key one entry of this process in Redis
 * (`lua/permit-lease.ts`) holding the permits in use here plus a few free ones, granted and released here without
 * Redis. A released permit stays in the batch for the next request; free permits left unused for a sweep
 * (`BATCH_TARGET_MS`) go back. Every permit this process holds counts as held in Redis until it gives it back or
 * its entry expires, `leaseTtlMs` after its last take or renewal (renewed every third of it while held): a
 * process that dies returns its permits after that, as a strict lease does.
 */
export class PermitLeases {
  private readonly entries = new Map<string, Entry>();
  private sweeper: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly host: LeaseHost,
    private readonly ttlMs: number,
  ) {}

  decide(
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    reason: string,
    asLease: boolean,
  ): Promise<Decided | Lease> {
    const m = binding.members[0];
    let entry = this.entries.get(m.key);
    if (entry === undefined) {
      entry = {
        binding,
        held: 0,
        inUse: 0,
        endsAt: Number.NEGATIVE_INFINITY,
        renewAt: 0,
        fleet: 0,
        busy: false,
        waiting: undefined,
      };
      this.entries.set(m.key, entry);
    }
    entry.binding = binding;
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

  /** Permits this process holds free for `key` (Redis counts them as held): what `statistics` adds back. */
  free(key: string, now: number): number {
    const entry = this.entries.get(key);
    if (entry === undefined) return 0;
    this.lapse(entry, now);
    return entry.held - entry.inUse;
  }

  /** A grant from the free permits, or undefined when Redis must be asked. */
  private local(entry: Entry, w: Waiter, now: number): Decided | Lease | undefined {
    this.lapse(entry, now);
    if (entry.held - entry.inUse < w.permits) return undefined;
    entry.inUse += w.permits;
    entry.busy = true;
    this.startSweeper();
    const m = entry.binding.members[0];
    m.owner.granted++;
    const key = m.key;
    const owner = {
      releasePermits: (_slot: number, permits: number) => {
        entry.inUse -= permits;
        this.host.released(key);
      },
    };
    const lease = new HeldLease(
      m.spec.algorithm.limit,
      this.remaining(entry),
      w.permits,
      owner,
      0,
      0,
      m.owner,
      m.partKey,
    );
    return w.asLease ? lease : { lease, blocked: -1, local: false };
  }

  /** Past its TTL the entry may be gone from Redis: the free permits are no longer this process's. */
  private lapse(entry: Entry, now: number): void {
    if (now >= entry.endsAt && entry.held > entry.inUse) entry.held = entry.inUse;
  }

  private remaining(entry: Entry): number {
    return entry.fleet + entry.held - entry.inUse;
  }

  /**
   * A take of the permits `need` asks beyond the free ones, and as headroom a quarter of those in use more, at
   * most 5 % of the limit (a limit under 20 is taken exactly: what one process holds free, others cannot have).
   */
  private take(entry: Entry, need: number, now: number): void {
    const missing = need - (entry.held - entry.inUse);
    const limit = entry.binding.members[0].spec.algorithm.limit;
    const want = missing + Math.min(Math.floor((entry.inUse + need) / 4), Math.floor(limit / 20));
    this.send(entry, 'l', want, missing, now, true);
  }

  /** Writes the entry as `held` (a give-back, a renewal, or a correction after a late take). */
  private sync(entry: Entry, now: number): void {
    this.send(entry, 'g', 0, 0, now, false);
  }

  private send(entry: Entry, op: 'l' | 'g', want: number, need: number, sentAt: number, take: boolean): void {
    const args: string[] = [];
    const held = entry.held;
    this.host.encodeArgs(
      args,
      entry.binding,
      op,
      want,
      `${need}:${held}:${this.host.holder}`,
      this.host.now(),
    );
    const key = entry.binding.members[0].key;
    entry.renewAt = sentAt + this.ttlMs / 3;
    let answered = false;
    this.host.send({
      key,
      keysTo: (out) => out.push(key),
      argsTo: (out) => {
        for (const a of args) out.push(a);
      },
      answer: (reply) => {
        answered = true;
        this.host.answered(entry.binding);
        if (take) this.taken(entry, reply, sentAt, held);
        else entry.endsAt = sentAt + this.ttlMs - this.host.resolutionMs;
      },
      fail: (error) => {
        if (answered) return;
        answered = true;
        if (take) this.failed(entry, error);
      },
      // Answered after its deadline: Redis wrote what it granted, which nobody here holds. Written again.
      late: () => this.sync(entry, this.host.clock()),
    });
  }

  private taken(entry: Entry, reply: string, sentAt: number, sentHeld: number): void {
    const f = reply.split(',');
    const now = this.host.clock();
    const waiting = entry.waiting ?? [];
    entry.waiting = undefined;
    let from = 0;
    entry.endsAt = sentAt + this.ttlMs - this.host.resolutionMs;
    if (f[0] === '1') {
      // Redis wrote what was sent plus the grant (nothing here lowers `held` while a take is in flight).
      entry.held = sentHeld + Number(f[1]);
      entry.fleet = Number(f[2]);
    } else {
      // Refused: the first waiting decision is answered so; the rest ask again.
      const w = waiting[0];
      const m = entry.binding.members[0];
      if (w.permits > 0 && w.op === 't') m.owner.rejected++;
      entry.fleet = Number(f[4]);
      const lease = Lease.rejected(f[6] === 'L' ? 'locked' : w.reason, {
        retryAfterMs: f[6] === 'L' ? Number(f[2]) : undefined,
        limit: m.spec.algorithm.limit,
        remaining: Number(f[4]),
        resetAfterMs: undefined,
        source: m.owner,
        key: m.partKey,
      });
      w.resolve(w.asLease ? lease : { lease, blocked: 0, local: false });
      from = 1;
    }
    for (let i = from; i < waiting.length; i++) {
      const w = waiting[i];
      const answer = this.local(entry, w, now);
      if (answer !== undefined) {
        w.resolve(answer);
        continue;
      }
      entry.waiting = waiting.slice(i);
      this.take(entry, w.permits, now);
      return;
    }
  }

  private failed(entry: Entry, error: StoreUnavailableError): void {
    failWaiting(this.host, entry, error);
  }

  private startSweeper(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => this.sweep(), BATCH_TARGET_MS);
    this.sweeper.unref();
  }

  /** Free permits unused since the last sweep go back; held entries are renewed; empty ones forgotten. */
  private sweep(): void {
    const now = this.host.clock();
    let holding = false;
    for (const [key, entry] of this.entries) {
      if (entry.waiting !== undefined) {
        holding = true;
        continue;
      }
      this.lapse(entry, now);
      const busy = entry.busy;
      entry.busy = false;
      if (entry.held > entry.inUse && !busy) {
        entry.held = entry.inUse;
        this.sync(entry, now);
      } else if (entry.held > 0 && now >= entry.renewAt) {
        this.sync(entry, now);
      }
      if (entry.held > 0 || entry.inUse > 0) holding = true;
      else this.entries.delete(key);
    }
    if (!holding && this.sweeper !== undefined) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
