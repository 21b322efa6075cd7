import { concurrency } from '../../index.ts';
import { type Answer, type Chapter, got, line, say, sent, why } from './chapter.ts';

function order(answers: Answer[]): string {
  return [...answers]
    .filter((a) => a.status === 200)
    .sort((a, b) => a.at - b.at)
    .map((a) => `#${a.index + 1}`)
    .join(' ');
}

/** A concurrency limit with no queue, then with a queue served oldest-first and newest-first. */
export const concurrencyLimits: Chapter = {
  title: 'Concurrency limits and queues',
  async run(tour) {
    const base = await tour.serve(
      {
        policies: {
          none: concurrency({ permitLimit: 2 }),
          fifo: concurrency({ permitLimit: 1, queueLimit: 4, queueOrder: 'oldest-first' }),
          lifo: concurrency({ permitLimit: 1, queueLimit: 4, queueOrder: 'newest-first' }),
        },
      },
      { '/none': 'none', '/fifo': 'fifo', '/lifo': 'lifo' },
    );
    say('Each request takes 150 ms. A limit of 2 in flight, no queue:');
    const none = await tour.send(base, { path: '/none?ms=150', count: 6 });
    sent('6 × GET at once');
    got(none);
    why('Two run, four are refused at once: 429 without Retry-After, as nobody knows when a slot frees up.');

    for (const path of ['/fifo', '/lifo']) {
      const queueOrder = path === '/fifo' ? 'oldest-first' : 'newest-first';
      say(`1 in flight, a queue of 4, ${queueOrder}; requests sent 20 ms apart:`);
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          new Promise((resolve) => setTimeout(resolve, i * 20)).then(() =>
            tour.send(base, { path: `${path}?ms=150` }).then(([a]) => ({ ...a, index: i })),
          ),
        ),
      );
      sent(`6 × GET ${path}, #1 … #6`);
      got(answers);
      line(`served in the order ${order(answers)}`);
    }
    why(
      `With a queue, requests wait instead of failing; the queue holds 4, so the sixth is refused (queue full).
      Oldest-first serves them in arrival order. Newest-first serves the latest arrival first (the freshest request
      is the one most likely still wanted) and, when the queue is full, evicts the oldest waiter to make room.
      A client that disconnects while waiting leaves the queue at once.`,
    );
  },
};
