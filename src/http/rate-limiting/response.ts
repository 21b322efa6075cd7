import type { Algorithm } from '../../algorithms/algorithm.ts';
import { ChainLease, type Lease } from '../../limiters/lease.ts';
import { PartitionedLimiter } from '../../limiters/partitioned.ts';
import {
  type PolicyState,
  rateLimitHeaders,
  rejectionBody,
  retryAfterSeconds,
} from '../ratelimit-headers.ts';
import type { HttpRequest } from '../request.ts';
import type { Member, ResolvedOptions } from './options.ts';
import type { RouteLimits } from './route.ts';

/** The header fields of a limited response, as `[name, value]` pairs (no `Retry-After`). */
export function limitHeaders(
  options: ResolvedOptions,
  route: RouteLimits,
  req: HttpRequest,
  lease: Lease,
): Array<[string, string]> {
  if (options.headers.length === 0) return [];
  return rateLimitHeaders(policyStates(route, req, lease), options.headers, {
    partitionKeys: options.hasher,
  });
}

/**
 * One state per limiter in force. A granted chain lease has one lease per member; a rejection carries only the
 * rejecting member's, so the others are read from their statistics (no reset time then).
 */
export function policyStates(route: RouteLimits, req: HttpRequest, lease: Lease): PolicyState[] {
  const { members, names } = route;
  const states: PolicyState[] = new Array(members.length);
  const leases = lease instanceof ChainLease ? lease.members : [lease];
  const granted = lease.granted;
  for (let i = 0; i < members.length; i++) {
    const member = members[i];
    const key = member instanceof PartitionedLimiter ? partitionKey(member, req) : undefined;
    const algorithm = algorithmOf(member, key);
    let own: Lease | undefined;
    if (granted) own = leases[i];
    else if (lease.source === member) own = leases[0];
    const state: PolicyState = { name: names[i], limit: algorithm.limit, remaining: 0 };
    if (own !== undefined) {
      state.remaining = own.remaining;
      if (own.resetAfterMs !== undefined) state.resetAfterMs = own.resetAfterMs;
    } else {
      state.remaining =
        member instanceof PartitionedLimiter
          ? member.statistics(req).available
          : member.statistics().available;
    }
    if (algorithm.windowMs !== undefined) state.windowMs = algorithm.windowMs;
    if (!algorithm.timeBased) state.unit = 'concurrent-requests';
    if (key !== undefined) state.partitionKey = key;
    states[i] = state;
  }
  return states;
}

/** The status, header fields and body of a rejection, before `onRejected` sees them. */
export function rejection(
  options: ResolvedOptions,
  route: RouteLimits,
  req: HttpRequest,
  lease: Lease,
  policyName: string | undefined,
): { status: number; headers: Headers; body: string } {
  const headers = new Headers();
  if (lease.retryAfterMs !== undefined) {
    headers.set('Retry-After', String(retryAfterSeconds(lease.retryAfterMs)));
  }
  for (const [name, value] of limitHeaders(options, route, req, lease)) headers.append(name, value);
  const rejecting = route.members.indexOf(lease.source as Member);
  const violated = rejecting < 0 ? [] : [route.names[rejecting]];
  const { contentType, body } = rejectionBody({
    format: options.body,
    status: options.status,
    retryAfterMs: lease.retryAfterMs,
    policies: violated.length > 0 ? violated : policyName === undefined ? undefined : [policyName],
  });
  headers.set('Content-Type', contentType);
  return { status: options.status, headers, body };
}

/** The partition key of `req` in `member`: the key its own key function gives. */
export function partitionKey(member: PartitionedLimiter<unknown>, req: HttpRequest): string | undefined {
  try {
    return (member['keyOf'] as (r: unknown) => string)(req);
  } catch {
    return undefined;
  }
}

function algorithmOf(member: Member, key: string | undefined): Algorithm {
  if (!(member instanceof PartitionedLimiter)) return member.algorithm;
  const map = member['map'] as Map<string, number>;
  const code = key === undefined ? undefined : map.get(key);
  if (code !== undefined) return member.coreOf(code).algorithm;
  return (member['specOf'] as (key: string) => { algorithm: Algorithm })(key ?? '').algorithm;
}
