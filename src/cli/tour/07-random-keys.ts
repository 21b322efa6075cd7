import type { IncomingMessage } from 'node:http';
import { headerValue, validatedKey } from '../../http/keys.ts';
import { fixedWindow, partitioned } from '../../index.ts';
import { type Chapter, got, line, say, sent, why } from './chapter.ts';

/** Keys a client chooses are a way around the limit and a way to fill memory, unless they are validated. */
export const randomKeys: Chapter = {
  title: 'A flood of random keys',
  async run(tour) {
    const clock = tour.clock;
    const known = new Set(['key-alice', 'key-bob']);
    const naive = partitioned({
      key: (req: IncomingMessage) => String(req.headers['x-api-key'] ?? ''),
      limiter: fixedWindow({ permitLimit: 10, window: '1m', clock }),
    });
    const validated = partitioned({
      key: validatedKey({ from: headerValue('x-api-key'), validate: (k) => known.has(k) }),
      limiter: fixedWindow({ permitLimit: 10, window: '1m', clock }),
    });
    const base = await tour.serve(
      { policies: { naive, validated } },
      { '/naive': 'naive', '/validated': 'validated' },
    );
    say(
      'Two routes limit 10 requests per minute per API key. One trusts the header; the other keys only validated keys.',
    );
    const random = (i: number) => ({ 'x-api-key': `forged-${i}-${Math.random().toString(36).slice(2)}` });
    const a = await tour.send(base, { path: '/naive', count: 500, headers: random });
    sent('500 × GET /naive, each with a fresh random X-Api-Key');
    got(a);
    line(`partitions in memory: ${naive.size}`);
    const b = await tour.send(base, { path: '/validated', count: 500, headers: random });
    sent('500 × GET /validated, the same');
    got(b);
    line(`partitions in memory: ${validated.size}`);
    const alice = await tour.send(base, {
      path: '/validated',
      count: 3,
      headers: () => ({ 'x-api-key': 'key-alice' }),
    });
    sent('then Alice, with her real key, 3 × GET /validated');
    got(alice);
    why(
      `Trusting the header gives every forged key a fresh bucket: nothing is limited and memory grows with the
      flood. validatedKey() folds every unknown value into one shared bucket: the flood limits itself, memory holds
      one partition for it, and Alice's own bucket is untouched.`,
    );
  },
};
