import { fixedWindow, slidingWindow } from '../../index.ts';
import { type Chapter, got, say, sent, why } from './chapter.ts';

/** The classic weakness of fixed windows: twice the limit across a boundary. */
export const boundary: Chapter = {
  title: 'Fixed vs sliding window at a boundary',
  async run(tour) {
    const clock = tour.clock;
    const start = clock.now();
    const at = (seconds: number) => clock.jump(start + seconds * 1000 - clock.now());
    const base = await tour.serve(
      {
        policies: {
          fixed: fixedWindow({ permitLimit: 10, window: '1s', clock }),
          sliding: slidingWindow({ permitLimit: 10, window: '1s', segmentsPerWindow: 10, clock }),
        },
      },
      { '/fixed': 'fixed', '/sliding': 'sliding' },
    );
    say(
      'Both routes allow 10 requests per second. A client sends 10 at t = 0.95 s and 10 more at t = 1.05 s.',
    );
    // Each answer at the tour's time it came back: when the batch was sent, plus how long it took.
    const events: Record<'fixed' | 'sliding', Array<{ atMs: number; ok: boolean }>> = {
      fixed: [],
      sliding: [],
    };
    const batch = async (path: 'fixed' | 'sliding') => {
      const sentAt = clock.now() - start;
      const answers = await tour.send(base, { path: `/${path}`, count: 10 });
      for (const a of answers) events[path].push({ atMs: sentAt + a.at, ok: a.status === 200 });
      return answers;
    };
    at(0.95);
    const fixedBefore = await batch('fixed');
    const slidingBefore = await batch('sliding');
    at(1.05);
    const fixedAfter = await batch('fixed');
    const slidingAfter = await batch('sliding');
    sent('20 × GET /fixed within 100 ms');
    got([...fixedBefore, ...fixedAfter]);
    sent('20 × GET /sliding within 100 ms');
    got([...slidingBefore, ...slidingAfter]);
    tour.chart({
      kind: 'events',
      title: 'Requests on the tour clock, passed and refused',
      fromMs: 900,
      toMs: 1_100,
      marks: [{ atMs: 1_000, label: 'the fixed window restarts' }],
      windowMs: 1_000,
      rows: [
        { label: '/fixed', events: events.fixed },
        { label: '/sliding', events: events.sliding },
      ],
    });
    why(
      `The fixed window restarts at t = 1 s and forgets the first 10: 20 requests pass in 100 ms, twice the rate.
      That is the algorithm, not a bug. The sliding window remembers the segment 0.9–1.0 s until t = 1.9 s, so the
      second burst is refused: never more than 10 in any second (to the precision of its 100 ms segments).`,
    );
  },
};
