/**
 * One key's state as an administrator reads it (`limiter.state(key)`): what its next request would meet. Every
 * partitioned limiter answers it (memory, synchronously; Redis, as a promise); a chain answers
 * {@link ChainKeyState}.
 */
export interface KeyState {
  /** The most permits the key's limiter grants (its window's, bucket's or concurrency limit). */
  readonly limit: number;
  /** Permits a request could take now (0 when none; a lock does not change it). */
  readonly remaining: number;
  /**
   * Milliseconds until the key is back to full capacity (0 when it is): undefined for a concurrency limiter
   * holding permits, as nothing tells when its holders finish.
   */
  readonly resetAfterMs: number | undefined;
  /** Milliseconds left on an administrative lock (`lock(key, duration)`); 0 when the key is not locked. */
  readonly lockedForMs: number;
  /** Permits waiting in the key's queue (in this process). */
  readonly queued: number;
}

/**
 * A chain's state for one key: the tightest of its partitioned members (least `remaining`, its `limit`; the
 * longest `resetAfterMs` and `lockedForMs`; `queued` summed), and each member's own state in `members`, in the
 * chain's order (undefined for a member that is not partitioned or has never seen the key).
 */
export interface ChainKeyState extends KeyState {
  readonly members: readonly (KeyState | undefined)[];
}

/** The tightest of `states` (see {@link ChainKeyState}), or undefined when none is known. */
export function tightest(states: readonly (KeyState | undefined)[]): ChainKeyState | undefined {
  let decisive: KeyState | undefined;
  let resetAfterMs: number | undefined = 0;
  let lockedForMs = 0;
  let queued = 0;
  for (const state of states) {
    if (state === undefined) continue;
    if (decisive === undefined || state.remaining < decisive.remaining) decisive = state;
    if (state.resetAfterMs === undefined || resetAfterMs === undefined) resetAfterMs = undefined;
    else resetAfterMs = Math.max(resetAfterMs, state.resetAfterMs);
    lockedForMs = Math.max(lockedForMs, state.lockedForMs);
    queued += state.queued;
  }
  if (decisive === undefined) return undefined;
  return {
    limit: decisive.limit,
    remaining: decisive.remaining,
    resetAfterMs,
    lockedForMs,
    queued,
    members: states,
  };
}
