import { Lease } from '../limiters/lease.ts';
import { telemetry } from '../telemetry.ts';
import type { Binding } from './binding.ts';
import type { ResolvedOptions } from './options.ts';

/**
 * The `onUnavailable` answer, counted in `floodgate.store.unavailable` by limiter name. (Over HTTP the engine
 * also counts the request as `floodgate.requests{result: store_unavailable}` under its policy: a separate
 * instrument here keeps that one from counting each outage answer twice.)
 */
export function unavailableAnswer(options: ResolvedOptions, binding: Binding, permits: number): Lease {
  const first = binding.members[0];
  telemetry().storeUnavailable.add(1, { limiter: first.owner.name });
  const policy = options.onUnavailable;
  const limit = first.spec.algorithm.limit;
  let lease: Lease;
  if (policy === 'fail-open') {
    lease = new Lease(
      true,
      undefined,
      undefined,
      limit,
      Math.max(0, limit - permits),
      undefined,
      first.owner,
    );
  } else if (policy === 'fail-closed') {
    lease = new Lease(false, 'unavailable', options.retryIntervalMs, limit, 0, undefined, first.owner);
  } else {
    try {
      if ('core' in policy) lease = policy.tryAcquire(Math.min(permits, policy.limit));
      else return policy.tryAcquire(binding.partKey ?? first.owner.name, permits);
    } catch {
      lease = new Lease(false, 'unavailable', options.retryIntervalMs, limit, 0, undefined, first.owner);
    }
  }
  lease.key = first.partKey;
  return lease;
}
