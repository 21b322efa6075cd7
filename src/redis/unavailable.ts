import type { Lease } from '../limiters/lease.ts';
import type { Decided } from './binding.ts';

// Leases answered by `onUnavailable` (Redis failed or was late) rather than by Redis: the HTTP layer counts
// them as `store_unavailable`. A WeakSet, so the shared Lease class carries nothing for memory limiters.
const unavailableAnswers = new WeakSet<Lease>();

/** Whether `onUnavailable` answered this lease (Redis failed or missed its deadline), not Redis. */
export function isUnavailableAnswer(lease: Lease): boolean {
  return unavailableAnswers.has(lease);
}

/** @internal A decision's lease, marked when it is `onUnavailable`'s answer (local, and not the blocked cache). */
export function leaseOf(decided: Decided): Lease {
  if (decided.local && decided.blocked < 0) unavailableAnswers.add(decided.lease);
  return decided.lease;
}
