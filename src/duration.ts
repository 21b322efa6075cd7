/** A duration in milliseconds, or a string such as `'500ms'`, `'10s'`, `'1m'`, `'1h'`, `'1.5s'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h'}`;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;

/**
 * Parses a {@link Duration} for option `name`. Throws a `TypeError` naming the option and the value when it is
 * not a finite, positive duration (or non-negative when `allowZero`).
 */
export function parseDuration(name: string, value: unknown, allowZero = false): number {
  let ms: number | undefined;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'string') {
    const match = PATTERN.exec(value.trim());
    if (match) ms = Number(match[1]) * UNIT_MS[match[2]];
  }
  if (ms === undefined || !Number.isFinite(ms) || ms < 0 || (ms === 0 && !allowZero)) {
    throw new TypeError(
      `${name} must be a ${allowZero ? 'non-negative' : 'positive'} duration in milliseconds or a string like '500ms', '10s', '1m', '1h'; got ${describe(value)}`,
    );
  }
  return ms;
}

/** A short, safe rendering of a bad option value for error messages. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === 'function') return 'a function';
  if (value === null || typeof value !== 'object') return String(value);
  if (Array.isArray(value)) return 'an array';
  return 'an object';
}
