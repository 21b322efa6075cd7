import { RANKS } from '../algorithms/priority-classes.ts';
import { describe } from '../duration.ts';

/**
 * A request's class: `'critical'`, `'default'`, `'sheddable'`, or a number (higher is more important;
 * `'critical'` is 2, `'default'` 1, `'sheddable'` 0).
 */
export type Priority = 'critical' | 'default' | 'sheddable' | number;

/** The class names and their ranks. */
export const PRIORITY_NAMES = ['critical', 'default', 'sheddable'] as const;
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
