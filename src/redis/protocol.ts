import type { Algorithm } from '../algorithms/algorithm.ts';
import { FixedWindow } from '../algorithms/fixed-window.ts';
import { SlidingWindow } from '../algorithms/sliding-window.ts';
import { TokenBucket } from '../algorithms/token-bucket.ts';

/** The operations of the decision script (see `lua/decide.ts`). */
export type Op = 't' | 'w' | 'p' | 'x' | 'n';

/** Arguments per member the script reads, in order. */
export const MEMBER_ARGS = 10;

/** One member of one request: its key and the settings the script decides with. */
export interface MemberCall {
  key: string;
  algorithm: Algorithm;
  countRejected: boolean;
  /** The clock value of the limiter's t = 0, or '' to anchor a fresh state at the request. */
  origin: string;
  /** Local waiters are ahead of this request (oldest-first): it may not overtake them. */
  blocked: boolean;
  /** Milliseconds of TTL added to the state's own (large with a test clock, whose time is not Redis's). */
  pad: number;
  /** `"<permits>:<lease id>"` for a concurrency lease, else ''. */
  lease: string;
  leaseTtl: number;
}

/** Appends one request's arguments: `op, permits, members, now` then each member's {@link MEMBER_ARGS}. */
export function encodeRequest(
  out: string[],
  op: Op,
  permits: number,
  now: string,
  members: readonly MemberCall[],
): void {
  out.push(op, String(permits), String(members.length), now);
  for (const m of members) {
    const a = m.algorithm;
    let kind: string;
    let p1 = '';
    let p2 = '';
    if (a instanceof FixedWindow) {
      kind = 'fw';
      p1 = String(a.windowMs);
    } else if (a instanceof SlidingWindow) {
      kind = 'sw';
      p1 = String(a.windowMs);
      p2 = String(a.segments);
    } else if (a instanceof TokenBucket) {
      kind = a.replenishment === 'continuous' ? 'tc' : 'tb';
      p1 = String(a.tokensPerPeriod);
      p2 = String(a.periodMs);
    } else if (a.kind === 'concurrency') {
      kind = 'cc';
    } else {
      throw new TypeError(`floodgate/redis: no Lua twin for algorithm ${JSON.stringify(a.kind)}`);
    }
    out.push(
      kind,
      String(a.limit),
      p1,
      p2,
      m.countRejected ? '1' : '0',
      m.origin,
      m.blocked ? '1' : '0',
      String(m.pad),
      m.lease,
      String(m.leaseTtl),
    );
  }
}

/** A number from the script ('' is none). */
export function decodeNumber(value: unknown): number | undefined {
  if (value === '' || value === undefined || value === null) return undefined;
  return Number(value);
}
