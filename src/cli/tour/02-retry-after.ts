import { concurrency, fixedWindow, slidingWindow, tokenBucket } from '../../index.ts';
import { type Chapter, fields, line, say, sequence, why } from './chapter.ts';

/** Retry-After says when a retry can succeed; each algorithm knows it differently, concurrency not at all. */
export const retryAfter: Chapter = {
  title: 'Retry-After, algorithm by algorithm',
  async run(tour) {
    const clock = tour.clock;
    const start = clock.now();
    const at = (seconds: number) => clock.jump(start + seconds * 1000 - clock.now());
    const base = await tour.serve(
      {
        policies: {
          fixed: fixedWindow({ permitLimit: 5, window: '10s', clock }),
          sliding: slidingWindow({ permitLimit: 5, window: '10s', segmentsPerWindow: 5, clock }),
          bucket: tokenBucket({ tokenLimit: 5, tokensPerPeriod: 1, period: '2s', clock }),
          slots: concurrency({ permitLimit: 1 }),
        },
      },
      { '/fixed': 'fixed', '/sliding': 'sliding', '/bucket': 'bucket', '/slots': 'slots' },
    );
    say(
      'Four routes, four limiters, all created at t = 0. The tour moves its clock instead of making you wait.',
    );

    at(7);
    const fixed = await tour.send(base, { path: '/fixed', count: 6, parallel: false });
    line(`fixed window, 5 per 10 s        t=7.0 s  6 × GET  →  ${sequence(fixed)}`);
    fields(fixed[5], ['Retry-After']);
    why('The window restarts at t = 10 s, 3 s away.');

    at(7.2);
    const s1 = await tour.send(base, { path: '/sliding', count: 3, parallel: false });
    at(9);
    const s2 = await tour.send(base, { path: '/sliding', count: 3, parallel: false });
    line(
      `sliding window, 5 per 10 s, 5 segments   t=7.2 s  3 × GET → ${sequence(s1)}   t=9.0 s  3 × GET → ${sequence(s2)}`,
    );
    fields(s2[2], ['Retry-After']);
    why(
      `The 3 permits taken at t = 7.2 s (the segment 6–8 s) come back when that segment leaves the window, one
      full window after it began: t = 16 s, 7 s away. Nothing comes back before, so an earlier retry would fail.`,
    );

    at(9.5);
    const b = await tour.send(base, { path: '/bucket', count: 6, parallel: false });
    line(`token bucket, 5 tokens, +1 per 2 s      t=9.5 s  6 × GET  →  ${sequence(b)}`);
    fields(b[5], ['Retry-After']);
    why('The next token arrives at the next 2 s boundary, t = 10 s: 0.5 s away, rounded up to 1 (never 0).');

    const held = tour.send(base, { path: '/slots?ms=300' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const busy = await tour.send(base, { path: '/slots' });
    await held;
    line(`concurrency, 1 at a time        a 300 ms request in flight, 1 × GET  →  ${sequence(busy)}`);
    fields(busy[0], ['Retry-After', 'RateLimit-Policy']);
    why(
      `Nothing tells when a request in flight will finish, so floodgate does not guess: no Retry-After.
      The policy's unit says what is counted: concurrent requests.`,
    );
  },
};
