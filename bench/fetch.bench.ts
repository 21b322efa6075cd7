// Overhead per call of floodgate/fetch against plain fetch, on loopback, when nothing is limited, beside
// bottleneck and p-limit wrapping the same fetch (run: npm run bench:fetch). Not a test: numbers vary by machine
// and load; compare the contenders with each other. Env: ROUNDS (default 7), CALLS per round (default 2000),
// CONCURRENCY for the parallel mode (default 32).
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import Bottleneck from 'bottleneck';
import pLimit from 'p-limit';
import { built } from './http-runner.ts';

// floodgate as published, from dist/ (the script builds first): under tsx, esbuild's keepNames would add a naming
// call to every closure made per call, a cost the published code does not have (as in bench:http).
const { rateLimitedFetch } = await built<typeof import('../src/fetch/index.ts')>('fetch/index');
const { concurrency, tokenBucket } = await built<typeof import('../src/index.ts')>('index');

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const CALLS = Number(process.env.CALLS ?? 2000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 32);

// The server runs in a worker thread so that its work does not queue behind the client's on one event loop.
const server = new Worker(
  `const http = require('node:http');
   const { parentPort } = require('node:worker_threads');
   const s = http.createServer((req, res) => res.end('ok'));
   s.keepAliveTimeout = 60_000;
   s.listen(0, '127.0.0.1', () => parentPort.postMessage(s.address().port));`,
  { eval: true },
);
const [port] = (await once(server, 'message')) as [number];
const url = `http://127.0.0.1:${port}/`;

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
type Call = (url: string) => Promise<Response>;

/** The contenders, each wrapping `inner` and never limiting. */
function contendersOver(inner: Fetch): Array<[string, Call]> {
  const bottleneck = new Bottleneck({ maxConcurrent: null, minTime: 0 });
  const limit = pLimit(1_000_000);
  return [
    ['plain fetch', (u) => inner(u)],
    [
      'floodgate tokenBucket (never limits)',
      rateLimitedFetch({
        limiter: tokenBucket({ tokenLimit: 1e9, tokensPerPeriod: 1e9, period: '1s' }),
        fetch: inner,
      }),
    ],
    [
      'floodgate tokenBucket + adaptive + retry',
      rateLimitedFetch({
        limiter: tokenBucket({ tokenLimit: 1e9, tokensPerPeriod: 1e9, period: '1s' }),
        adaptive: true,
        retry: 2,
        fetch: inner,
      }),
    ],
    [
      'floodgate concurrency (body wrapped)',
      rateLimitedFetch({ limiter: concurrency({ permitLimit: 1e6, queueLimit: 1 }), fetch: inner }),
    ],
    ['bottleneck wrap (no limits)', bottleneck.wrap((u: string) => inner(u))],
    ['p-limit (no limit reached)', (u) => limit(() => inner(u))],
  ];
}

/** Microseconds per call: `CALLS` calls, `parallel` at a time, each reading its body. */
async function run(call: Call, parallel: number, calls: number): Promise<number> {
  let next = 0;
  const worker = async () => {
    while (next < calls) {
      next++;
      await (await call(url)).text();
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: parallel }, worker));
  return ((performance.now() - start) * 1000) / calls;
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

async function mode(title: string, inner: Fetch, parallel: number, calls = CALLS): Promise<void> {
  const contenders = contendersOver(inner);
  const samples = contenders.map(() => [] as number[]);
  for (const [, call] of contenders) await run(call, parallel, calls); // warm up every path
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order so that drift (GC, other load) does not always favour the same contender.
    const order = contenders.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) samples[i].push(await run(contenders[i][1], parallel, calls));
  }
  const base = median(samples[0]);
  console.log(
    `\n${title} — ${ROUNDS} rounds × ${calls} calls, median µs per call (× plain fetch: the median of each ` +
      "round's ratio, both measured in the same round)",
  );
  contenders.forEach(([name], i) => {
    const m = median(samples[i]);
    const ratio = median(samples[i].map((x, round) => x / samples[0][round]));
    const extra = i === 0 ? '' : `  ${m - base >= 0 ? '+' : ''}${(m - base).toFixed(1)} µs`;
    console.log(`  ${name.padEnd(38)} ${m.toFixed(1).padStart(7)} µs  ×${ratio.toFixed(3)}${extra}`);
  });
}

console.log(`node ${process.version}, loopback server in a worker thread`);
const loopback: Fetch = (input, init) => fetch(input, init);
await mode('loopback, sequential', loopback, 1);
await mode(`loopback, ${CONCURRENCY} in flight`, loopback, CONCURRENCY);
// The wrappers' own cost, without the network's noise: the inner fetch answers at once.
const ready: Fetch = async () => new Response('ok');
await mode('no network (inner fetch answers at once), sequential', ready, 1);
await server.terminate();
