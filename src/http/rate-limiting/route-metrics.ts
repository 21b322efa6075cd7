import type { Attributes } from '../../telemetry.ts';

/** The metric results of one decision (behaviour.md §4). */
export type Result =
  | 'acquired'
  | 'global_limiter'
  | 'endpoint_limiter'
  | 'queue_full'
  | 'canceled'
  | 'store_unavailable';

const RESULTS: readonly Result[] = [
  'acquired',
  'global_limiter',
  'endpoint_limiter',
  'queue_full',
  'canceled',
  'store_unavailable',
];

/**
 * The metric attributes of one route setting under one route template (`http.route`, when the adapter knows
 * it), allocated once so that recording a decision allocates nothing.
 */
export class RouteMetrics {
  /** `{ policy, result }` (and `http.route`) per result. */
  readonly results: Readonly<Record<Result, Attributes>>;
  /** The same with `dry_run: true`. */
  readonly dryRun: Readonly<Record<Result, Attributes>>;
  /** For the instruments that have no result (queued, active, lease duration): `{ policy }` (and `http.route`). */
  readonly held: Attributes;

  constructor(
    policy: string,
    /** The route's template (`/users/:id`), never a raw path; undefined when the adapter does not know it. */
    readonly template: string | undefined,
  ) {
    const route = template === undefined ? undefined : { 'http.route': template };
    const results = {} as Record<Result, Attributes>;
    const dryRun = {} as Record<Result, Attributes>;
    for (const result of RESULTS) {
      results[result] = { policy, result, ...route };
      dryRun[result] = { policy, result, dry_run: true, ...route };
    }
    this.results = results;
    this.dryRun = dryRun;
    this.held = { policy, ...route };
  }
}
