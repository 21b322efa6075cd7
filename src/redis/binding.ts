import type { Lease } from '../limiters/lease.ts';
import { type Priority, rankOf } from '../limiters/priority.ts';
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
  /**
   * The request's class, for members with priority classes (`concurrency({ classes })`): each is decided against
   * the share its class may use. Undefined: the default class.
   */
  rank?: number;
}

/** A decision's reply turned into a lease, and the index of the member that said no (-1: granted). */
export interface Decided {
  lease: Lease;
  blocked: number;
  /** The lease came from `onUnavailable` (or the blocked cache), not from Redis. */
  local: boolean;
}

/**
 * `binding` for a request of class `priority` (a TypeError for a bad one): itself for the default class, else a
 * copy that carries the rank (the binding may be a limiter's own, shared by every request).
 */
export function ranked(binding: Binding, priority: Priority | undefined): Binding {
  if (priority === undefined) return binding;
  return { ...binding, rank: rankOf('priority', priority) };
}
