import { tokenBucket } from '../../index.ts';
import { readRateLimit } from '../dialects.ts';
import { type Answer, type Chapter, got, say, sent, why } from './chapter.ts';

/** The tokens each answer says are left (its RateLimit field), in the order the answers came back. */
function levels(answers: Answer[]): Array<{ level: number; ok: boolean }> {
  return [...answers]
    .sort((a, b) => a.sentAt + a.ms - (b.sentAt + b.ms))
    .map((a) => ({
      level: readRateLimit(a.headers, Date.now()).quotas[0]?.remaining ?? 0,
      ok: a.status === 200,
    }));
}

/** Token buckets allow bursts up to their size, then a steady rate; idleness never builds more credit. */
export const bursts: Chapter = {
  title: 'Token bucket bursts',
  async run(tour) {
    const clock = tour.clock;
    const base = await tour.serve(
      { policies: { bucket: tokenBucket({ tokenLimit: 10, tokensPerPeriod: 2, period: '1s', clock }) } },
      { '/': 'bucket' },
    );
    say('A bucket of 10 tokens, refilled with 2 every second. It starts full.');
    const burst = await tour.send(base, { path: '/', count: 15 });
    sent('a burst of 15 × GET /');
    got(burst);
    clock.jump(1_000);
    const second = await tour.send(base, { path: '/', count: 5 });
    sent('1 s later, 5 × GET /');
    got(second);
    clock.jump(60_000);
    const idle = await tour.send(base, { path: '/', count: 15 });
    sent('after a minute of silence, 15 × GET /');
    got(idle);
    tour.chart({
      kind: 'level',
      title: "The bucket's level after each request, as its RateLimit field reported it",
      max: 10,
      unit: 'tokens',
      segments: [
        { label: 't = 0 s', points: levels(burst) },
        { label: 't = 1 s', points: levels(second) },
        { label: 't = 61 s', points: levels(idle) },
      ],
    });
    why(
      `The burst drains the bucket: 10 pass. One second brings 2 tokens, so 2 of the next 5 pass: the steady rate.
      A minute of idleness refills the bucket, but never beyond its 10 tokens: a quiet client cannot save up for a
      bigger burst later.`,
    );
  },
};
