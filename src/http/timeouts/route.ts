import { type Duration, describe } from '../../duration.ts';
import type { ResolvedOptions } from './options.ts';
import { looksLikeDuration } from './options.ts';
import { buildPolicy, type TimeoutPolicy, type TimeoutPolicyOptions } from './policy.ts';

/**
 * A route's timeout setting: a duration (`'2s'`, `2000`), the name of a policy, a policy of its own, or `false`
 * to disable timeouts on the route.
 */
export type RouteTimeout = Duration | string | false | TimeoutPolicyOptions;

/** A validated route setting. Resolution: disabled wins, then the route's own policy, then a named one. */
export type TimeoutRouteSetting =
  | { readonly kind: 'disable' }
  | { readonly kind: 'route'; readonly policy: TimeoutPolicy }
  | { readonly kind: 'named'; readonly policy: TimeoutPolicy };

const DISABLE: TimeoutRouteSetting = Object.freeze({ kind: 'disable' });

/**
 * Validates a route setting against the configured policies, so that a route naming a policy that does not
 * exist fails where the route is declared (at startup), not at its first request.
 */
export function parseRouteSetting(
  options: ResolvedOptions,
  value: unknown,
  where = 'route timeout',
): TimeoutRouteSetting {
  if (value === false) return DISABLE;
  if (typeof value === 'string' && !looksLikeDuration(value)) {
    const policy = options.policies.get(value);
    if (!policy) {
      const known = [...options.policies.keys()].map((k) => JSON.stringify(k)).join(', ') || 'none';
      throw new RangeError(`${where}: no timeout policy named ${describe(value)} (known: ${known})`);
    }
    return { kind: 'named', policy };
  }
  if (
    typeof value === 'number' ||
    typeof value === 'string' ||
    (value !== null && typeof value === 'object')
  ) {
    return { kind: 'route', policy: buildPolicy(where, 'route', value, options.defaultPolicy) };
  }
  throw new TypeError(
    `${where} must be a duration, a policy name, a policy object or false; got ${describe(value)}`,
  );
}
