import { describe } from '../duration.ts';

/**
 * A request's class: `'critical'`, `'default'`, `'sheddable'`, or a number (higher is more important;
 * `'critical'` is 2, `'default'` 1, `'sheddable'` 0).
 */
export type Priority = 'critical' | 'default' | 'sheddable' | number;

/** The class names and their ranks. */
export const PRIORITY_NAMES = ['critical', 'default', 'sheddable'] as const;
const RANKS: Record<string, number> = { critical: 2, default: 1, sheddable: 0 };
export const DEFAULT_RANK = 1;
export const CRITICAL_RANK = 2;

/** The rank of `priority`, or a TypeError naming `name` and the value. */
export function rankOf(name: string, priority: unknown): number {
  if (priority === undefined) return DEFAULT_RANK;
  if (typeof priority === 'number' && Number.isFinite(priority)) return priority;
  if (typeof priority === 'string' && priority in RANKS) return RANKS[priority];
  throw new TypeError(
    `${name} must be 'critical', 'default', 'sheddable' or a finite number; got ${describe(priority)}`,
  );
}

/** The metric name of a rank. */
export function className(rank: number): string {
  return rank === 2 ? 'critical' : rank === 1 ? 'default' : rank === 0 ? 'sheddable' : String(rank);
}

/**
 * How a limit is shared between classes (the `Partition` of Netflix's concurrency-limits, by class): a share of
 * the limit reserved for each class, which no lower class may use. `reserve: { critical: 0.2 }` keeps the top
 * 20 % of the limit for critical requests: default and sheddable requests are admitted up to 80 % of it.
 */
export class PriorityClasses {
  private readonly shares: ReadonlyArray<readonly [rank: number, share: number]>;

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
  }

  /** The most permits a request of `rank` may find held after its grant, under `limit`. */
  ceiling(rank: number, limit: number): number {
    let reserved = 0;
    for (const [r, share] of this.shares) if (r > rank) reserved += share;
    if (reserved === 0) return limit;
    return Math.max(1, Math.floor(limit * (1 - reserved)));
  }
}
