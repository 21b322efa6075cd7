import type { Tour } from './kit.ts';

export { type Answer, catchingWarnings, fields, got, line, say, sent, sequence, why } from './kit.ts';

/** One lesson of the tour. */
export interface Chapter {
  title: string;
  run(tour: Tour): Promise<void>;
}
