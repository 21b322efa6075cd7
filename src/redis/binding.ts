import type { Lease } from '../limiters/lease.ts';
import type { LimiterSpec } from '../limiters/rate-limiter.ts';

/** Whoever a member's counts and lease `source` belong to (a Redis limiter). */
export interface Owner {
  readonly name: string;
  granted: number;
  rejected: number;
}

/** One member of a decision, bound to its partition. */
export interface BoundMember {
  key: string;
  spec: LimiterSpec;
  /** The limiter's t = 0 on the store's clock ('' when a fresh state anchors at its first request). */
  origin: string;
  owner: Owner;
  /** The partition key of a partitioned limiter's member (its leases' `key`), else undefined. */
  partKey: string | undefined;
  /** Decided from batches of permits taken from Redis (`leases: true`) when it is decided alone. */
  leased: boolean;
}

/** The partitions one request binds to (one member, or a chain's members). */
export interface Binding {
  members: BoundMember[];
  /** The partition key of the first partitioned member (for a partitioned insurance limiter). */
  partKey: string | undefined;
  /** A chain answers with a `ChainLease`. */
  chain: boolean;
  /** A chain mixing units: true for each requests member (one permit per request). */
  ones?: readonly boolean[] | undefined;
}

/** What member `i` takes of `permits` (see {@link Binding.ones}). */
export function ownPermits(binding: Binding, i: number, permits: number): number {
  return binding.ones?.[i] === true && permits > 1 ? 1 : permits;
}

/** A decision's reply turned into a lease, and the index of the member that said no (-1: granted). */
export interface Decided {
  lease: Lease;
  blocked: number;
  /** The lease came from `onUnavailable` (or the blocked cache), not from Redis. */
  local: boolean;
}
