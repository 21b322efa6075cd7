import type { Lease, LeaseMetadata } from '../limiters/lease.ts';

/** The metadata of a lease `onUnavailable` answered (Redis failed or was late), rather than Redis. */
export const FALLBACK: LeaseMetadata = Object.freeze({ fallback: true });

/** Whether `onUnavailable` answered this lease (Redis failed or missed its deadline), not Redis. */
export function isUnavailableAnswer(lease: Lease): boolean {
  return lease.metadata.fallback === true;
}
