import { describe } from '../duration.ts';

// The names each options object accepts. Kept as plain lists so that a shared helper can take them over.
export const CLIENT_OPTIONS = [
  'limiter',
  'key',
  'onLimited',
  'pause',
  'retry',
  'adaptive',
  'maxPartitions',
  'clock',
  'now',
  'random',
] as const;
export const FETCH_OPTIONS = [...CLIENT_OPTIONS, 'fetch'] as const;
export const PAUSE_OPTIONS = ['statuses', 'max', 'jitter', 'maxEntries'] as const;
export const RETRY_OPTIONS = [
  'attempts',
  'methods',
  'budget',
  'minRetries',
  'windowMs',
  'backoff',
  'isFailure',
] as const;
export const BACKOFF_OPTIONS = ['baseMs', 'maxMs'] as const;
export const ADAPTIVE_OPTIONS = ['k', 'historyMs', 'maxRejection', 'minRequests', 'isFailure'] as const;

/** Throws a TypeError naming the first option of `options` not in `known`, with the closest known name. */
export function rejectUnknown(name: string, options: object, known: readonly string[]): void {
  for (const option of Object.keys(options)) {
    if (known.includes(option)) continue;
    const closest = known.reduce((best, candidate) =>
      distance(option, candidate) < distance(option, best) ? candidate : best,
    );
    throw new TypeError(
      `${name}: unknown option ${describe(option)}; did you mean ${describe(closest)}? (known: ${known.join(', ')})`,
    );
  }
}

/** Levenshtein distance, case-insensitive: names are short, so the plain table is fine. */
function distance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length];
}
