/**
 * A token bucket's overshoot measured from grants timed on the machine clock (`test/redis/bucket-lease-processes`,
 * `bench/redis-leases.bench.ts`): each grant is `[lo, hi]`, the clock before its call and once its lease was
 * there, between which it was made.
 */

/**
 * The worst, over spans [s, e], of (grants whose [lo, hi] lies inside) − (limit + rate·(e − s)): s runs over the
 * `lo`s from the latest down, the grants starting at or after it kept sorted by `hi`; for each, the best e is one
 * of those `hi`s.
 */
export function worstOvershoot(grants: [number, number][], limit: number, ratePerMs: number): number {
  const byLo = [...grants].sort((a, b) => b[0] - a[0]);
  const his: number[] = [];
  let worst = Number.NEGATIVE_INFINITY;
  for (const [lo, hi] of byLo) {
    let at = his.length;
    while (at > 0 && his[at - 1] > hi) at--;
    his.splice(at, 0, hi);
    for (let k = 0; k < his.length; k++) worst = Math.max(worst, k + 1 - limit - ratePerMs * (his[k] - lo));
  }
  return worst;
}
