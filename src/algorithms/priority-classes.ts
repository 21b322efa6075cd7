import { describe } from '../duration.ts';

/** The class names' ranks (`limiters/priority.ts` says what a class is). */
export const RANKS: Readonly<Record<string, number>> = { critical: 2, default: 1, sheddable: 0 };

/**
 * How a limit is shared between classes (the `Partition` of Netflix's concurrency-limits, by class): a share of
 * the limit reserved for each class, which no lower class may use. `reserve: { critical: 0.2 }` keeps the top
 * 20 % of the limit for critical requests: default and sheddable requests are admitted up to 80 % of it.
 */
export class PriorityClasses {
  private readonly shares: ReadonlyArray<readonly [rank: number, share: number]>;
  /** The shares as text, `rank=share` by rank (for signatures: two limiters with other reserves never share). */
  readonly text: string;

  /** `reserve` maps a class (name or number) to its share, each in [0, 1), summing below 1. */
  constructor(where: string, reserve: unknown) {
    const shares: [number, number][] = [];
    if (reserve !== undefined) {
      if (reserve === null || typeof reserve !== 'object' || Array.isArray(reserve)) {
        throw new TypeError(
          `${where}: reserve must be an object like { critical: 0.2 }; got ${describe(reserve)}`,
        );
      }
      let total = 0;
      for (const [key, share] of Object.entries(reserve)) {
        const rank = key in RANKS ? RANKS[key] : Number(key);
        if (key === '' || !Number.isFinite(rank)) {
          throw new TypeError(
            `${where}: reserve.${key} names no class; use 'critical', 'default', 'sheddable' or a number`,
          );
        }
        if (typeof share !== 'number' || !(share >= 0 && share < 1)) {
          throw new RangeError(
            `${where}: reserve.${key} must be a share from 0 to below 1; got ${describe(share)}`,
          );
        }
        total += share;
        shares.push([rank, share]);
      }
      if (total >= 1) throw new RangeError(`${where}: reserve shares must sum below 1; got ${total}`);
    }
    this.shares = shares;
    this.text = shares
      .slice()
      .sort((a, b) => a[0] - b[0])
      .map(([rank, share]) => `${rank}=${share}`)
      .join(',');
  }

  /** Whether any share is reserved (else every class may use the whole limit). */
  get reserves(): boolean {
    return this.shares.some(([, share]) => share > 0);
  }

  /** The most permits a request of `rank` may find held after its grant, under `limit`. */
  ceiling(rank: number, limit: number): number {
    let reserved = 0;
    for (const [r, share] of this.shares) if (r > rank) reserved += share;
    if (reserved === 0) return limit;
    return Math.max(1, Math.floor(limit * (1 - reserved)));
  }
}
