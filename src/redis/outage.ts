/**
 * An outage must not pass silently: with no `onError` of the application's, a store says once when Redis stops
 * answering (`FLOODGATE_REDIS_UNAVAILABLE`: what `onUnavailable` answers meanwhile) and once when it answers again
 * (`FLOODGATE_REDIS_RECOVERED`) — once per outage, not per failed decision. Warnings go through
 * `process.emitWarning` as a `FloodgateWarning`, so `process.on('warning')`, `--no-warnings` and the code work as for
 * Node's own.
 */
import { emitFloodgateWarning } from '../warning.ts';

/**
 * Which parts of Redis (scopes: a Cluster node or slot, '' for the one server) are failing now, and the two
 * warnings. Silent when the application handles failures itself (`onError`).
 */
export class OutageWarnings {
  private readonly down = new Set<string>();

  /**
   * @param what who speaks, e.g. `'floodgate/redis'`
   * @param meanwhile what decisions get while Redis is away, in words (from `onUnavailable`)
   * @param silent true when an `onError` hook was given
   */
  constructor(
    private readonly what: string,
    private readonly meanwhile: string,
    private readonly silent: boolean,
  ) {}

  /** True while some scope is failing: a successful answer must then be told ({@link answered}). */
  get outage(): boolean {
    return this.down.size > 0;
  }

  /** Redis failed in `scope` (and decisions there skip it for a while). Warns when nothing was failing before. */
  failed(scope: string, error: Error): void {
    if (this.down.size === 0 && !this.silent) {
      emitFloodgateWarning(
        'FLOODGATE_REDIS_UNAVAILABLE',
        `${this.what}: Redis is unavailable (${error.message}); until it answers again ${this.meanwhile}. ` +
          'Give the store an onError hook to handle outages yourself (and silence this warning).',
      );
    }
    this.down.add(scope);
  }

  /** Redis answered in `scope`. Warns when that ends the outage. */
  answered(scope: string): void {
    if (this.down.delete(scope) && this.down.size === 0 && !this.silent) {
      emitFloodgateWarning(
        'FLOODGATE_REDIS_RECOVERED',
        `${this.what}: Redis answers again; decisions are Redis's.`,
      );
    }
  }
}

/** What `onUnavailable` gives, in words, for the warning. */
export function meanwhileOf(policy: unknown): string {
  if (policy === 'fail-open') return "every decision is granted (onUnavailable: 'fail-open', the default)";
  if (policy === 'fail-closed') return "every decision is rejected (onUnavailable: 'fail-closed')";
  return 'decisions are made by the onUnavailable limiter in this process';
}
