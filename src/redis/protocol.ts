import type { Algorithm } from '../algorithms/algorithm.ts';

/** The operations of the decision script (see `lua/decide.ts`). */
export type Op = 't' | 'w' | 'p' | 'x' | 'n' | 'r' | 'l' | 'g' | 's' | AdminOp;

/**
 * Key administration (see `lua/admin.ts`): `a` state, `e` reset, `k` lock, `u` unlock, `c` charge, `v` give
 * back. (Letters apart from the decision ops': `l`/`g` are a lease's take and give-back, `s` a settle.)
 */
export type AdminOp = 'a' | 'e' | 'k' | 'u' | 'c' | 'v';

/** Arguments per member the script reads, in order: `spec, origin, blocked, lease`. */
export const MEMBER_ARGS = 4;

/** One member of one request: its key and what the script decides with. */
export interface MemberCall {
  key: string;
  /** The member's constant settings, from {@link specText}. */
  spec: string;
  /** The clock value of the limiter's t = 0, or '' to anchor a fresh state at the request. */
  origin: string;
  /** Local waiters are ahead of this request (oldest-first): it may not overtake them. */
  blocked: boolean;
  /** `"<permits>:<lease id>"` for a concurrency lease, else ''. */
  lease: string;
}

/**
 * A limiter's settings as the script reads them: `kind:limit:p1:p2:flags:ttlPad:leaseTtl`, where flags is
 * `countRejected` (1) plus `overdraw` (2) (`countRejected` may be given as a boolean). Constant per
 * limiter (per class and limiter with priority classes: `ceiling`), so it is built once and sent as one argument. `ttlPad`: milliseconds of TTL added to the state's own
 * (large with a test clock, whose time is not Redis's). The twin and its parameters are what the algorithm says
 * of itself ({@link Algorithm.remote}), so the store never asks which class it is.
 */
export function specText(
  algorithm: Algorithm,
  countRejected: boolean | { readonly countRejected: boolean; readonly overdraw?: boolean },
  pad: number,
  leaseTtl: number,
  ceiling?: number,
): string {
  const remote = algorithm.remote;
  if (remote === undefined) {
    throw new TypeError(`floodgate/redis: no Lua twin for algorithm ${JSON.stringify(algorithm.kind)}`);
  }
  // A third parameter and more (a lockout's) ride in p2, joined by '_'.
  // A concurrency member with classes carries the request's class's ceiling in p1 (it has no parameter of its own).
  const [p1 = ceiling ?? '', ...rest] = remote.params;
  const p2 = rest.join('_');
  const flags =
    typeof countRejected === 'boolean'
      ? Number(countRejected)
      : Number(countRejected.countRejected) + (countRejected.overdraw === true ? 2 : 0);
  return `${remote.twin}:${algorithm.limit}:${p1}:${p2}:${flags}:${pad}:${leaseTtl}`;
}

/**
 * Appends one request's arguments: `op, permits, members, now` then each member's {@link MEMBER_ARGS}; or, for
 * the common request (a try or queued attempt whose members have no origin, are not blocked and hold no lease),
 * a short form: `T|W, permits, now, spec` for one member, `C|D, permits, now, members, spec…` for a chain —
 * half the arguments or fewer, which both ioredis and Redis pay for one by one; shortest, for a try of one
 * permit on Redis's clock, the spec alone (every op is one letter, a spec is longer) and `B, members, spec…`.
 * A lone concurrency lease with no origin, not blocked: `K|Q, permits, now, spec, lease` to acquire (`t`/`w`),
 * `X|N, now, spec, lease` to release or renew.
 */
export function encodeRequest(
  out: string[],
  op: Op,
  permits: number,
  now: string,
  members: readonly MemberCall[],
): void {
  if ((op === 't' || op === 'w') && members.every((m) => m.origin === '' && !m.blocked && m.lease === '')) {
    if (members.length === 1 && encodeLone(out, op, permits, now, members[0].spec)) return;
    const one = op === 't' && permits === 1 && now === '';
    // A chain of such members: `C|D, permits, now, members` (or `B, members`) then one spec per member.
    if (one) out.push('B', String(members.length));
    else out.push(op === 't' ? 'C' : 'D', String(permits), now, String(members.length));
    for (const m of members) out.push(m.spec);
    return;
  }
  if (members.length === 1 && members[0].lease !== '' && members[0].origin === '' && !members[0].blocked) {
    // A lone concurrency lease: `K|Q, permits, now, spec, lease` acquired, `X|N, now, spec, lease` released or
    // renewed (8 arguments in the general form).
    const m = members[0];
    if (op === 't' || op === 'w') {
      out.push(op === 't' ? 'K' : 'Q', String(permits), now, m.spec, m.lease);
      return;
    }
    if (op === 'x' || op === 'n') {
      out.push(op === 'x' ? 'X' : 'N', now, m.spec, m.lease);
      return;
    }
  }
  out.push(op, String(permits), String(members.length), now);
  for (const m of members) out.push(m.spec, m.origin, m.blocked ? '1' : '0', m.lease);
}

/**
 * The short form of a lone member with no origin, not blocked and holding no lease (see {@link encodeRequest});
 * false, with nothing appended, for an op that has none.
 */
export function encodeLone(out: string[], op: Op, permits: number, now: string, spec: string): boolean {
  if (op === 't' && permits === 1 && now === '') out.push(spec);
  else if (op === 't' || op === 'w') out.push(op === 't' ? 'T' : 'W', String(permits), now, spec);
  else return false;
  return true;
}

/** A number from the script ('' is none). */
export function decodeNumber(value: unknown): number | undefined {
  if (value === '' || value === undefined || value === null) return undefined;
  return Number(value);
}
