import { clientIp } from '../../http/client-ip.ts';
import { fixedWindow, partitioned } from '../../index.ts';
import { type Chapter, fields, got, line, say, sent, sequence, why } from './chapter.ts';

/** What a client sees by default: 200s with the IETF fields, then 429 with Retry-After and a short body. */
export const defaults: Chapter = {
  title: 'What a limited client sees',
  async run(tour) {
    const global = partitioned({
      key: clientIp(),
      limiter: fixedWindow({ permitLimit: 5, window: '10s', clock: tour.clock }),
    });
    const base = await tour.serve({ global }, { '/': undefined });
    say(
      'A server allows 5 requests per client per 10 s window (a fixed window, partitioned by client address).',
    );
    const answers = await tour.send(base, { path: '/', count: 7, parallel: false });
    sent('7 × GET / one after another');
    got(answers);
    line(`      ${sequence(answers)}`);
    fields(answers[0], ['RateLimit-Policy', 'RateLimit'], 'the first answer:');
    fields(answers[6], ['Retry-After', 'RateLimit', 'Content-Type'], 'the seventh answer:');
    line(`  body: ${JSON.stringify(answers[6].body)}`);
    why(
      `Every limited response carries RateLimit-Policy (quota q=5 per w=10 s) and RateLimit (r remaining, t seconds
      until the quota resets), the fields of the IETF draft. pk is a salted hash of the client's key: the server
      never echoes the address itself. A rejection is 429 Too Many Requests (not 503, which tells load balancers
      the server is down), with Retry-After in whole seconds, rounded up so the client never comes back too soon.`,
    );
  },
};
