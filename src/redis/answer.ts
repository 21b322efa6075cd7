import { ChainLease, HeldLease, Lease } from '../limiters/lease.ts';
import { type Binding, type BoundMember, type Decided, ownPermits } from './binding.ts';
import type { ResolvedOptions } from './options.ts';
import { decodeNumber } from './protocol.ts';
import { RedisChainLease, RedisRefundableLease, type SettleSender } from './refund.ts';

/**
 * The script's answers turned into the leases the memory store builds: granted (refundable when time-based),
 * held (a concurrency lease, renewed while held), rejected, and a chain's. Sending is the engine's: it is given
 * how to release or renew a lease and how to refund a grant.
 */
export class Answers {
  constructor(
    private readonly options: ResolvedOptions,
    /** Returns a concurrency lease's permits (`'x'`) or renews it (`'n'`). */
    private readonly leaseOp: (binding: Binding, op: 'x' | 'n', leaseId: string) => void,
    /** Gives a time-based grant's permits back (op `r`). */
    private readonly refund: (
      m: BoundMember,
      permits: number,
      expectedResetMs: number,
      emptied: boolean,
    ) => void,
    /** Settles grants: one request (op `s`) for a lease, or for a chain's members. */
    private readonly settle: SettleSender,
  ) {}

  toLease(
    binding: Binding,
    reply: string[],
    op: 't' | 'w',
    permits: number,
    reason: string,
    leaseId: string,
  ): Decided {
    const members = binding.members;
    if (reply[0] === '1' && !binding.chain && members[0].spec.algorithm.timeBased) {
      // A lone time-based member granted: the commonest answer, without the chain's bookkeeping.
      const m = members[0];
      if (permits > 0) m.owner.granted++;
      const lease = this.granted(m, permits, Number(reply[1]), decodeNumber(reply[2]));
      return { lease, blocked: -1, local: false };
    }
    if (reply[0] === '1') {
      const leases: Lease[] = new Array(members.length);
      let decisive = 0;
      for (let i = 0; i < members.length; i++) {
        const m = members[i];
        const remaining = Number(reply[1 + 2 * i]);
        const limit = m.spec.algorithm.limit;
        if (permits > 0) m.owner.granted++;
        if (permits > 0 && !m.spec.algorithm.timeBased) {
          leases[i] = this.held(binding, m, remaining, permits, leaseId);
        } else if (m.spec.algorithm.timeBased) {
          leases[i] = this.granted(
            m,
            ownPermits(binding, i, permits),
            remaining,
            decodeNumber(reply[2 + 2 * i]),
          );
        } else {
          leases[i] = Lease.granted({ limit, remaining, source: m.owner, key: m.partKey });
        }
        if (leases[i].remaining < leases[decisive].remaining) decisive = i;
      }
      const lease = binding.chain ? new RedisChainLease(leases[decisive], leases, this.settle) : leases[0];
      return { lease, blocked: -1, local: false };
    }
    const index = Number(reply[1]) - 1;
    const m = members[index];
    // A queued attempt that fails is not a rejection: the request keeps waiting.
    if (permits > 0 && op === 't') m.owner.rejected++;
    // A seventh field: 'l', a lockout refused it (locked out after failures); 'L', an administrative lock
    // (see `lua/admin.ts`).
    const locked = reply.length > 6 && (reply[6] === 'l' || reply[6] === 'L');
    const lease = Lease.rejected(locked ? 'locked' : reason, {
      retryAfterMs: decodeNumber(reply[2]),
      limit: m.spec.algorithm.limit,
      remaining: Number(reply[4]),
      resetAfterMs: decodeNumber(reply[5]),
      source: m.owner,
      key: m.partKey,
    });
    if (!binding.chain) return { lease, blocked: index, local: false };
    const chained = new ChainLease(lease, decodeNumber(reply[3]), [lease], lease.source);
    return { lease: chained, blocked: index, local: false };
  }

  /** A granted lease of a time-based member: refundable (see `RedisRefundableLease`) when it took permits. */
  private granted(m: BoundMember, permits: number, remaining: number, reset: number | undefined): Lease {
    const limit = m.spec.algorithm.limit;
    if (permits === 0) {
      return Lease.granted({ limit, remaining, resetAfterMs: reset, source: m.owner, key: m.partKey });
    }
    return new RedisRefundableLease(
      limit,
      remaining,
      reset,
      m.owner,
      m.partKey,
      permits,
      this.clock(),
      this.clock,
      (n, expected, emptied) => this.refund(m, n, expected, emptied),
      m,
      this.settle,
    );
  }

  /** The clock refunds measure elapsed time on: the test clock, or this process's monotonic clock. */
  private readonly clock = (): number => (this.options.clock ? this.options.clock.now() : performance.now());

  /** A concurrency lease held in Redis: renewed while held, returned on release, expired if this process dies. */
  private held(binding: Binding, m: BoundMember, remaining: number, permits: number, leaseId: string): Lease {
    const only: Binding = { members: [m], partKey: binding.partKey, chain: false };
    const renew = setInterval(() => this.leaseOp(only, 'n', leaseId), this.options.leaseTtlMs / 3);
    renew.unref();
    const owner = {
      releasePermits: () => {
        clearInterval(renew);
        this.leaseOp(only, 'x', leaseId);
        this.options.onRelease(m.key);
      },
    };
    return new HeldLease(m.spec.algorithm.limit, remaining, permits, owner, 0, 0, m.owner, m.partKey);
  }
}
