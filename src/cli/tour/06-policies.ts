import { clientIp } from '../../http/client-ip.ts';
import { fixedWindow, partitioned } from '../../index.ts';
import { type Chapter, fields, got, say, sent, why } from './chapter.ts';

/** A global limit and a stricter named policy, decided as one chain. */
export const policies: Chapter = {
  title: 'A global limit and a named policy',
  async run(tour) {
    const clock = tour.clock;
    const byClient = clientIp();
    const base = await tour.serve(
      {
        global: partitioned({
          key: byClient,
          limiter: fixedWindow({ permitLimit: 10, window: '1m', clock }),
        }),
        policies: {
          login: partitioned({
            key: byClient,
            limiter: fixedWindow({ permitLimit: 3, window: '1m', clock }),
          }),
        },
      },
      { '/': undefined, '/login': 'login', '/health': false },
    );
    say(
      'Every route allows 10 requests per client per minute; /login allows 3 on top of that; /health is not limited.',
    );
    const login = await tour.send(base, { path: '/login', count: 8, parallel: false });
    sent('8 × GET /login');
    got(login);
    const home = await tour.send(base, { path: '/' });
    sent('then 1 × GET /');
    got(home);
    fields(home[0], ['RateLimit']);
    const health = await tour.send(base, { path: '/health', count: 20 });
    sent('and 20 × GET /health');
    got(health);
    why(
      `The global limit and the route's policy are one all-or-nothing chain: the 5 requests /login refused cost
      nothing globally, so the client still has 10 − 3 − 1 = 6 requests left (r=6). Libraries that check the
      limiters one after the other would have charged all 8, leaving 1. /health opts out of every limit.`,
    );
  },
};
