import { LIMIT_CHANGES } from '../../limiters/core.ts';
import type { LimitShape } from '../../limiters/limiter.ts';
import { sfString } from '../ratelimit-headers.ts';
import type { Member } from './options.ts';

/**
 * What the response headers need of one limiter in force, computed once per route: its name, its key function
 * and, when its settings do not depend on the key, the static part of its `RateLimit-Policy` item.
 *
 * The engine calls `keyOf` once per request and keeps the keys with the decision: the headers never call it.
 */
export class MemberInfo {
  /** The header items' name. */
  readonly name: string;
  /** The name as a Structured Field string (`"global"`). */
  readonly sfName: string;
  /** The partition key function (called once per request, by the engine), or undefined for a plain limiter. */
  // biome-ignore lint/suspicious/noExplicitAny: the adapter's own request type
  readonly keyOf: ((req: any) => string | PromiseLike<string>) | undefined;
  #policyItem: string | undefined;
  /** {@link LIMIT_CHANGES} when the cached header items were built: a change of limit rebuilds them. */
  limitChanges = LIMIT_CHANGES.count;
  /** Metric attributes naming this limiter. */
  readonly attributes: { policy: string };
  /** `"name";r=`, the start of this limiter's `RateLimit` item. */
  readonly remainingPrefix: string;

  // What the last response's header fields were built from, mutable: a hot key skips the hash and the strings.
  /** The partition key of the last request (undefined for a plain limiter). */
  lastKey: string | undefined = undefined;
  /** Its `;pk=:…:` parameter, or `''`. */
  lastPk = '';
  /** Its `RateLimit-Policy` item, or `''` before the first request. */
  lastPolicy = '';
  /** The last `t` in seconds (-1: none), and `;t=…;pk=:…:` built from it and {@link lastSuffixPk}. */
  lastResetSeconds = -1;
  lastSuffixPk = '';
  lastSuffix = '';
  /** The last `RateLimit` item, built from {@link lastRemaining} and {@link lastSuffix} (`''`: none yet). */
  lastRemaining = -1;
  lastLimit = '';
  /** Partitions alive when the `partitions` metric last counted them. */
  knownSize = 0;

  /** `name`: the policy's (metrics); `headerName`: its header items' (a cost member's unit). */
  constructor(
    readonly member: Member,
    name: string,
    headerName = name,
  ) {
    this.name = headerName;
    this.sfName = sfString(headerName);
    this.attributes = { policy: name };
    this.remainingPrefix = `${this.sfName};r=`;
    this.keyOf = member.keyOf;
    const shape = member.shape;
    this.#policyItem = shape === undefined ? undefined : policyItem(this.sfName, shape);
  }

  /** What the header fields say, when the same for every key (read live: it changes with `setLimit`). */
  get algorithm(): LimitShape | undefined {
    return this.member.shape;
  }

  /** `"name";q=…;qu=…;w=…` when the algorithm is the same for every key (built again after a `setLimit`). */
  get policyItem(): string | undefined {
    if (this.limitChanges !== LIMIT_CHANGES.count) {
      const shape = this.member.shape;
      this.#policyItem = shape === undefined ? undefined : policyItem(this.sfName, shape);
    }
    return this.#policyItem;
  }

  /** What the header fields say for `key`'s partition (a key function that threw leaves `key` undefined). */
  algorithmFor(key: string | undefined): LimitShape {
    return this.member.shape ?? this.member.shapeFor(key ?? '');
  }
}

/** `"name";q=100;w=60`, or with `qu="concurrent-requests"` and no window for a concurrency limit. */
export function policyItem(sfName: string, algorithm: LimitShape): string {
  const unit = algorithm.timeBased ? '' : ';qu="concurrent-requests"';
  const w = algorithm.windowMs;
  const window =
    w === undefined || !Number.isFinite(w) || w <= 0 ? '' : `;w=${Math.max(1, Math.ceil(w / 1000))}`;
  return `${sfName};q=${algorithm.limit}${unit}${window}`;
}
