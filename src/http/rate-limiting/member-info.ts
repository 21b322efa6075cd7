import type { Algorithm } from '../../algorithms/algorithm.ts';
import { PartitionedLimiter } from '../../limiters/partitioned.ts';
import { sfString } from '../ratelimit-headers.ts';
import type { HttpRequest } from '../request.ts';
import type { Member } from './options.ts';

/**
 * What the response headers need of one limiter in force, computed once per route: its name, its key function
 * and, when its settings do not depend on the key, the static part of its `RateLimit-Policy` item.
 *
 * Partitioned limiters keep their key function private; the engine reads it (and its spec function) here, in one
 * place, so the partition key can be hashed into `pk` without asking the application for it twice.
 */
export class MemberInfo {
  /** The name as a Structured Field string (`"global"`). */
  readonly sfName: string;
  /** The partition key of a request, or undefined for a plain limiter. Memoized for the request being decided. */
  readonly keyOf: ((req: HttpRequest) => string) | undefined;
  /** The algorithm when it is the same for every key. */
  readonly algorithm: Algorithm | undefined;
  /** `"name";q=…;qu=…;w=…` when the algorithm is known up front. */
  readonly policyItem: string | undefined;
  /** Metric attributes naming this limiter. */
  readonly attributes: { policy: string };

  constructor(
    readonly member: Member,
    readonly name: string,
  ) {
    this.sfName = sfString(name);
    this.attributes = { policy: name };
    if (member instanceof PartitionedLimiter) {
      this.keyOf = memoizeKey(member);
      const specOf = member['specOf'] as (key: string) => { algorithm: Algorithm };
      // A spec function of no parameters cannot depend on the key: ask it once.
      this.algorithm = specOf.length === 0 ? specOf('').algorithm : undefined;
    } else {
      this.keyOf = undefined;
      this.algorithm = member.algorithm;
    }
    this.policyItem = this.algorithm === undefined ? undefined : policyItem(this.sfName, this.algorithm);
  }

  /** The algorithm deciding `key`'s partition. */
  algorithmFor(key: string | undefined): Algorithm {
    if (this.algorithm !== undefined) return this.algorithm;
    const member = this.member as PartitionedLimiter<unknown>;
    const code = key === undefined ? undefined : (member['map'] as Map<string, number>).get(key);
    if (code !== undefined) return member.coreOf(code).algorithm;
    return (member['specOf'] as (key: string) => { algorithm: Algorithm })(key ?? '').algorithm;
  }
}

/** `"name";q=100;w=60`, or with `qu="concurrent-requests"` and no window for a concurrency limit. */
export function policyItem(sfName: string, algorithm: Algorithm): string {
  const unit = algorithm.timeBased ? '' : ';qu="concurrent-requests"';
  const w = algorithm.windowMs;
  const window =
    w === undefined || !Number.isFinite(w) || w <= 0 ? '' : `;w=${Math.max(1, Math.ceil(w / 1000))}`;
  return `${sfName};q=${algorithm.limit}${unit}${window}`;
}

const kMemo = Symbol('floodgate.keyMemo');
type KeyFn = ((req: unknown) => string) & { [kMemo]?: true };

/**
 * Wraps the limiter's key function with a one-entry memo on the request object: the limiter computes the key
 * to decide, the headers then reuse it. Keys are a function of the request, so this changes no decision.
 */
function memoizeKey(member: PartitionedLimiter<unknown>): (req: HttpRequest) => string {
  const current = member['keyOf'] as KeyFn;
  if (current[kMemo] === true) return current;
  let lastRequest: unknown;
  let lastKey = '';
  const memo: KeyFn = (req) => {
    if (req === lastRequest) return lastKey;
    const key = current(req);
    lastRequest = req;
    lastKey = key;
    return key;
  };
  memo[kMemo] = true;
  (member as unknown as { keyOf: KeyFn }).keyOf = memo;
  return memo;
}
