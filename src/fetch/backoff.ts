/** A wait of `attempt`'s retry: capped exponential backoff with full jitter, `random × min(max, base × 2^(n−1))`. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return ceiling * random();
}
