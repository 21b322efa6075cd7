import { LIMIT_CHANGES } from '../../limiters/core.ts';
import type { KeyedResource } from '../../limiters/keyed.ts';
import type { Lease } from '../../limiters/lease.ts';
import type { MemoryLimiter } from '../../limiters/limiter.ts';
import {
  type PolicyState,
  rateLimitHeaders,
  rejectionBody,
  retryAfterSeconds,
} from '../ratelimit-headers.ts';
import { type MemberInfo, policyItem } from './member-info.ts';
import type { Member, ResolvedOptions } from './options.ts';
import type { RouteLimits } from './route.ts';

/** The header fields of a limited response, as `[name, value]` pairs (no `Retry-After`). */
export function limitHeaders(
  options: ResolvedOptions,
  route: RouteLimits,
  resource: KeyedResource | undefined,
  lease: Lease,
): Array<[string, string]> {
  const fields: Array<[string, string]> = [];
  setLimitHeaders(options, route, resource, lease, fields, pushField);
  return fields;
}

function pushField(fields: Array<[string, string]>, name: string, value: string): void {
  fields.push([name, value]);
}

/**
 * Hands each header field of a limited response to `set(target, name, value)`: straight to the response in the
 * adapters, with no array in between. `resource` holds the keys the request was decided with: no key function
 * is called here.
 */
export function setLimitHeaders<T>(
  options: ResolvedOptions,
  route: RouteLimits,
  resource: KeyedResource | undefined,
  lease: Lease,
  target: T,
  set: (target: T, name: string, value: string) => void,
): void {
  const styles = options.headers;
  if (styles.length === 0) return;
  // The default, on every admitted request: built from strings remembered per limiter.
  if (lease.granted && styles.length === 1 && styles[0] === 'draft-10') {
    draft10(route, resource, lease, options, target, set);
    return;
  }
  const fields = rateLimitHeaders(policyStates(route, resource, lease), styles, {
    partitionKeys: options.hasher,
  });
  for (const [name, value] of fields) set(target, name, value);
}

function draft10<T>(
  route: RouteLimits,
  resource: KeyedResource | undefined,
  lease: Lease,
  options: ResolvedOptions,
  target: T,
  set: (target: T, name: string, value: string) => void,
): void {
  const infos = route.infos;
  if (infos.length === 1) {
    // One limiter, the usual case: no separators, no loop.
    const info = infos[0];
    remember(info, lease.key ?? resource?.keys[0], options);
    set(target, 'RateLimit-Policy', info.lastPolicy);
    set(target, 'RateLimit', limitItem(info, lease));
    return;
  }
  const leases = lease.members;
  let policies = '';
  let limits = '';
  for (let i = 0; i < infos.length; i++) {
    const info = infos[i];
    const own = leases === undefined ? lease : leases[i];
    remember(info, own.key ?? resource?.keys[i], options);
    const separator = i === 0 ? '' : ', ';
    policies += separator + info.lastPolicy;
    limits += separator + limitItem(info, own);
  }
  set(target, 'RateLimit-Policy', policies);
  set(target, 'RateLimit', limits);
}

// A burst from one client is one key again and again: its `pk` and policy item are kept from the last request
// rather than hashed (a Map lookup) and built again.
function remember(info: MemberInfo, key: string | undefined, options: ResolvedOptions): void {
  const changes = LIMIT_CHANGES.count;
  if (key === info.lastKey && info.lastPolicy !== '' && info.limitChanges === changes) return;
  const pk = key === undefined ? '' : `;pk=:${options.hasher(key)}:`;
  info.lastKey = key;
  info.lastPk = pk;
  info.lastPolicy = (info.policyItem ?? policyItem(info.sfName, info.algorithmFor(key))) + pk;
  info.limitChanges = changes;
}

/**
 * `"name";r=…;t=…;pk=:…:` of the member `remember` last saw. `;t=…;pk=:…:` is kept as one string (built again
 * when `t` or the key changes), so a value is two concatenations; and a value equal to the last one (a hot key
 * rejected again, a bucket at the same level) is the last string itself: Node validates a header value with a
 * regular expression, which must first flatten a freshly concatenated string.
 */
function limitItem(info: MemberInfo, own: Lease): string {
  const reset = own.resetAfterMs;
  let seconds = -1;
  if (reset !== undefined && Number.isFinite(reset)) seconds = integer(Math.ceil(reset / 1000));
  const pk = info.lastPk;
  if (seconds !== info.lastResetSeconds || pk !== info.lastSuffixPk) {
    info.lastResetSeconds = seconds;
    info.lastSuffixPk = pk;
    info.lastSuffix = seconds < 0 ? pk : `;t=${seconds}${pk}`;
    info.lastLimit = '';
  }
  const remaining = integer(own.remaining);
  if (remaining === info.lastRemaining && info.lastLimit !== '') return info.lastLimit;
  info.lastRemaining = remaining;
  info.lastLimit = info.remainingPrefix + remaining + info.lastSuffix;
  return info.lastLimit;
}

/** A Structured Field integer: 0 to 15 digits. */
function integer(value: number): number {
  if (!(value > 0)) return 0;
  return value >= 999_999_999_999_999 ? 999_999_999_999_999 : Math.floor(value);
}

/**
 * One state per limiter in force. A granted chain lease has one lease per member; a rejection carries only the
 * rejecting member's, so the others are read from their statistics (no reset time then) — in memory. A Redis
 * member the lease does not cover is left out: reading it would cost a round trip per rejection.
 */
export function policyStates(
  route: RouteLimits,
  resource: KeyedResource | undefined,
  lease: Lease,
): PolicyState[] {
  const { members, infos } = route;
  const states: PolicyState[] = [];
  const leases = lease.members ?? [lease];
  const granted = lease.granted;
  for (let i = 0; i < members.length; i++) {
    const member = members[i];
    const info = infos[i];
    let own: Lease | undefined;
    if (granted) own = leases[i];
    else if (lease.source === member) own = leases[0];
    // The lease names its partition; for a member it does not cover (rejected chain), the key decided with.
    const key = own?.key ?? resource?.keys[i];
    const algorithm = info.algorithmFor(key);
    const state: PolicyState = { name: info.name, limit: algorithm.limit, remaining: 0 };
    if (own !== undefined) {
      state.remaining = own.remaining;
      if (own.resetAfterMs !== undefined) state.resetAfterMs = own.resetAfterMs;
    } else if (member.store.sync) {
      // Read by the key decided with (the resource carries it): the key function is not called again.
      state.remaining = (member as MemoryLimiter).available(key);
    } else continue;
    if (algorithm.windowMs !== undefined) state.windowMs = algorithm.windowMs;
    if (!algorithm.timeBased) state.unit = 'concurrent-requests';
    if (key !== undefined) state.partitionKey = key;
    states.push(state);
  }
  return states;
}

/** A rejection to send: status, header fields (`Headers` once `onRejected` has seen them) and body. */
export interface Answer {
  status: number;
  headers: Iterable<[string, string]>;
  body: string;
}

/**
 * The status, header fields and body of a rejection, before `onRejected` sees them. When the store did not
 * answer (`storeUnavailable`), no limiter's state is known and none was violated: only `Retry-After` is sent.
 */
export function rejection(
  options: ResolvedOptions,
  route: RouteLimits,
  resource: KeyedResource | undefined,
  lease: Lease,
  policyName: string | undefined,
  storeUnavailable = false,
): { status: number; headers: Array<[string, string]>; body: string } {
  const headers: Array<[string, string]> = [];
  if (lease.retryAfterMs !== undefined) {
    headers.push(['Retry-After', String(retryAfterSeconds(lease.retryAfterMs))]);
  }
  let policies: string[] | undefined;
  if (!storeUnavailable) {
    for (const field of limitHeaders(options, route, resource, lease)) headers.push(field);
    const rejecting = route.members.indexOf(lease.source as Member);
    if (rejecting >= 0) policies = [route.names[rejecting]];
    else if (policyName !== undefined) policies = [policyName];
  }
  if (lease.reason === 'too-large') return tooLarge(options, lease, policies, headers);
  const { contentType, body } = rejectionBody({
    format: options.body,
    status: options.status,
    retryAfterMs: lease.retryAfterMs,
    policies,
  });
  headers.push(['Content-Type', contentType]);
  return { status: options.status, headers, body };
}

/**
 * A cost estimate above a limit that does not allow `overdraw` (reason `'too-large'`): 413 Content Too Large,
 * whatever `status` says — retrying cannot help, so no `Retry-After` either.
 */
function tooLarge(
  options: ResolvedOptions,
  lease: Lease,
  policies: string[] | undefined,
  headers: Array<[string, string]>,
): { status: number; headers: Array<[string, string]>; body: string } {
  const of = policies === undefined ? '' : ` of policy ${JSON.stringify(policies[0])}`;
  const detail = `Request too large: its cost estimate exceeds the limit (${lease.limit})${of}.`;
  if (options.body === 'text') {
    headers.push(['Content-Type', 'text/plain; charset=utf-8']);
    return { status: 413, headers, body: detail };
  }
  const problem: Record<string, unknown> = { title: 'Content Too Large', status: 413, detail };
  if (policies !== undefined) problem['violated-policies'] = policies;
  headers.push(['Content-Type', 'application/problem+json']);
  return { status: 413, headers, body: JSON.stringify(problem) };
}
