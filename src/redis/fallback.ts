import { keyFor } from '../limiters/keyed.ts';
import { Lease } from '../limiters/lease.ts';
import type { MemoryLimiter } from '../limiters/limiter.ts';
import { telemetry } from '../telemetry.ts';
import type { Binding } from './binding.ts';
import type { ResolvedOptions } from './options.ts';
import { FALLBACK } from './unavailable.ts';

/**
 * The `onUnavailable` answer, counted in `floodgate.store.unavailable` by limiter name. (Over HTTP the engine
 * also counts the request as `floodgate.requests{result: store_unavailable}` under its policy: a separate
 * instrument here keeps that one from counting each outage answer twice.) Every such lease carries
 * {@link FALLBACK} as its metadata, which is how `isUnavailableAnswer` tells it from Redis's own.
 */
export function unavailableAnswer(options: ResolvedOptions, binding: Binding, permits: number): Lease {
  const first = binding.members[0];
  telemetry().storeUnavailable.add(1, { limiter: first.owner.name });
  const policy = options.onUnavailable;
  const limit = first.spec.algorithm.limit;
  const key = first.partKey;
  if (policy === 'fail-open') {
    const remaining = Math.max(0, limit - permits);
    return Lease.granted({ limit, remaining, source: first.owner, key, metadata: FALLBACK });
  }
  const refused = {
    retryAfterMs: options.retryIntervalMs,
    limit,
    remaining: 0,
    source: first.owner,
    key,
    metadata: FALLBACK,
  };
  if (policy === 'fail-closed') return Lease.rejected('unavailable', refused);
  try {
    // An insurance limiter in memory: a partitioned one by the partition key (or the limiter's name), its
    // lease under its own key; a plain one with at most its limit, its lease under the partition's key.
    const insurance: MemoryLimiter = policy;
    if (insurance.keyOf !== undefined) {
      const resource = binding.partKey ?? first.owner.name;
      const lease = insurance.tryAcquireFor(keyFor(insurance as never, resource), permits);
      return Lease.forwarding(lease, lease.key, FALLBACK);
    }
    const lease = insurance.tryAcquireFor(undefined, Math.min(permits, insurance.shapeFor('').limit));
    return Lease.forwarding(lease, key, FALLBACK);
  } catch {
    return Lease.rejected('unavailable', refused);
  }
}
