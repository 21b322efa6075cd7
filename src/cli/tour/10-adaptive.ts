import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rateLimiting } from '../../adapters/node/rate-limiting.ts';
import { adaptiveConcurrency } from '../../index.ts';
import { type Chapter, line, say, sent, why } from './chapter.ts';

const WORKERS = 8; // what the pretend database can do at once
const SERVICE_MS = 30;
const CLIENTS = 40;
const RUN_MS = 4000;
const SLOWER_AT = 2000;
const BLOCKS = ' ▁▂▃▄▅▆▇█';

/** A row of block characters, one per value, scaled to the largest. */
function spark(values: number[]): string {
  const max = Math.max(1, ...values);
  return values.map((v) => BLOCKS[Math.round((v / max) * (BLOCKS.length - 1))]).join('');
}

/** An adaptive limit finding its level, then finding it again when the dependency gets 3× slower. */
export const adaptiveLimits: Chapter = {
  title: 'A concurrency limit that finds itself',
  async run(tour) {
    const limiter = adaptiveConcurrency({ queueLimit: 10 });
    let inFlight = 0;
    let slower = false;
    // The pretend database: 8 at a time at full speed; beyond that everyone shares (latency grows with load).
    const database = (): Promise<void> => {
      inFlight++;
      const ms = SERVICE_MS * (slower ? 3 : 1) * Math.max(1, inFlight / WORKERS);
      return new Promise((resolve) =>
        setTimeout(() => {
          inFlight--;
          resolve();
        }, ms),
      );
    };
    const limit = rateLimiting({ global: limiter });
    const server = http.createServer(
      limit((_req: IncomingMessage, res: ServerResponse) => {
        database().then(() => res.end('ok\n'));
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    say(
      `A pretend database does ${WORKERS} queries at once in ${SERVICE_MS} ms; more in flight and they share it, so
      each gets slower. ${CLIENTS} clients send requests back to back, through adaptiveConcurrency() — nobody tells
      it the number ${WORKERS}. After ${SLOWER_AT / 1000} s the database gets 3× slower.`,
    );
    const started = performance.now();
    const limits: number[] = [];
    const latencies: number[] = [];
    let window: number[] = [];
    const sampler = setInterval(() => {
      limits.push(limiter.statistics().limit);
      latencies.push(window.length === 0 ? 0 : window.reduce((a, b) => a + b, 0) / window.length);
      window = [];
    }, 100);
    const slowdown = setTimeout(() => {
      slower = true;
    }, SLOWER_AT);
    let ok = 0;
    let shed = 0;
    try {
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          while (performance.now() - started < RUN_MS) {
            const [answer] = await tour.send(base, { path: '/' });
            if (answer.status === 200) {
              ok++;
              window.push(answer.ms);
            } else {
              shed++;
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          }
        }),
      );
    } finally {
      clearInterval(sampler);
      clearTimeout(slowdown);
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    sent(
      `${ok + shed} × GET from ${CLIENTS} clients over ${RUN_MS / 1000} s: ${ok} answered, ${shed} shed (429)`,
    );
    const mark = `${' '.repeat(Math.round(SLOWER_AT / 100))}^ 3× slower`;
    line(`limit    ${spark(limits)}  (${Math.min(...limits)}–${Math.max(...limits)})`);
    line(`latency  ${spark(latencies)}  (mean per 100 ms, up to ${Math.max(...latencies).toFixed(0)} ms)`);
    line(`         ${mark}`);
    why(
      `The limit starts by measuring the no-load latency at 3 in flight, then grows while latency stays within
      a quarter of it and stops once latency climbs. When the database slows down, latency jumps and the limit is
      cut; when cutting does not bring latency back, the limiter measures the no-load latency again (the dip to
      3) and settles anew. Requests it turns away get a 429 at once instead of waiting behind a slow database.
      On a busy machine the event loop adds its own latency, so the level varies from run to run; the
      repeatable figures are in docs/overload.md (npm run bench:overload).`,
    );
  },
};
