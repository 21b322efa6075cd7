// How floodgate/fetch behaves against a failing dependency (run: npm run bench:fetch:adaptive). A real node:http
// server in a worker thread fails a share of its requests that the bench sets; the client calls it at a fixed
// rate (open loop, like users who keep coming) through each contender in turn, rounds alternating the order:
//   - outage: healthy for one history, then every request fails for OUTAGE histories, then healthy again for
//     RECOVERY histories. Measured: the load that reaches the server per call the application made during the
//     outage (naive retries multiply it), and how long after the recovery the client is back to full rate.
//   - 10 % of requests failing at random: goodput (calls answered 2xx per call made) against no throttling.
//   - overload: the server accepts CAPACITY of the offered rate per second and answers 503 (no Retry-After) past
//     it, for OUTAGE histories. Measured after the first history: requests reaching it per request it accepted.
// Not a test: timings are real and the machine is shared. Env: RATE (calls/s, default 200), HISTORY_MS (default
// 1000, the adaptive history and the retry budget's window), OUTAGE and RECOVERY (histories, default 4 each),
// RANDOM_S (seconds of the 10 % scenario, default 5), CAPACITY (share of RATE, default 0.25), ROUNDS (default 2).
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { RateLimitedError, type RateLimitedFetchOptions, rateLimitedFetch } from '../src/fetch/index.ts';
import { tokenBucket } from '../src/index.ts';

const RATE = Number(process.env.RATE ?? 200);
const HISTORY_MS = Number(process.env.HISTORY_MS ?? 1000);
const OUTAGE = Number(process.env.OUTAGE ?? 4);
const RECOVERY = Number(process.env.RECOVERY ?? 4);
const RANDOM_S = Number(process.env.RANDOM_S ?? 5);
const CAPACITY = Number(process.env.CAPACITY ?? 0.25);
const ROUNDS = Number(process.env.ROUNDS ?? 2);

// The server counts what reaches it, per phase the bench names; `share` of the requests fail with a 500.
const server = new Worker(
  `const http = require('node:http');
   const { parentPort } = require('node:worker_threads');
   let share = 0, phase = 'idle', counts = {}, perSecond = Infinity, tokens = 0, filled = performance.now();
   const s = http.createServer((req, res) => {
     const c = (counts[phase] ??= { hits: 0, failed: 0 });
     c.hits++;
     const now = performance.now();
     tokens = Math.min(perSecond / 10, tokens + ((now - filled) * perSecond) / 1000);
     filled = now;
     if (Math.random() < share) { c.failed++; res.writeHead(500).end('down'); }
     else if (perSecond !== Infinity && tokens < 1) { c.failed++; res.writeHead(503).end('busy'); }
     else { tokens -= 1; res.end('ok'); }
   });
   s.keepAliveTimeout = 60_000;
   parentPort.on('message', (m) => {
     if (m.share !== undefined) share = m.share;
     if (m.perSecond !== undefined) { perSecond = m.perSecond ?? Infinity; tokens = 0; }
     if (m.phase !== undefined) phase = m.phase;
     if (m.reset) counts = {};
     if (m.report) parentPort.postMessage({ counts });
   });
   s.listen(0, '127.0.0.1', () => parentPort.postMessage(s.address().port));`,
  { eval: true },
);
const [port] = (await once(server, 'message')) as [number];
const url = `http://127.0.0.1:${port}/`;

type Counts = Record<string, { hits: number; failed: number }>;
async function serverCounts(): Promise<Counts> {
  server.postMessage({ report: true });
  const [{ counts }] = (await once(server, 'message')) as [{ counts: Counts }];
  return counts;
}
/** Sets the failing share and the phase; the worker has applied it when this resolves. */
async function setServer(share: number, phase: string, perSecond: number | null = null): Promise<void> {
  server.postMessage({ share, phase, perSecond });
  await serverCounts();
}

type Api = (input: string) => Promise<Response>;
const roomy = () => tokenBucket({ tokenLimit: 1e6, tokensPerPeriod: 1e6, period: '1s' });
const backoff = { baseMs: 10, maxMs: 200 };
const client = (extra: Partial<RateLimitedFetchOptions>): Api =>
  rateLimitedFetch({ limiter: roomy(), onLimited: 'throw', ...extra });
const budgeted = { attempts: 3, budget: 0.2, windowMs: HISTORY_MS, backoff };
/** Name, client, and the contender it is compared with (the same retries without throttling). */
const contenders: Array<[string, () => Api, number | undefined]> = [
  ['fetch, no retries', () => (u) => fetch(u), undefined],
  [
    'naive: 3 retries, no budget',
    () => client({ retry: { attempts: 3, budget: false, backoff } }),
    undefined,
  ],
  ['retry budget 0.2 (3 retries)', () => client({ retry: budgeted }), undefined],
  [
    'adaptive (k = 2) + retry budget',
    () => client({ retry: budgeted, adaptive: { historyMs: HISTORY_MS } }),
    2,
  ],
  [
    'adaptive (k = 1.1) + retry budget',
    () => client({ retry: budgeted, adaptive: { historyMs: HISTORY_MS, k: 1.1 } }),
    2,
  ],
];
const adaptive = (i: number) => contenders[i][2] !== undefined;

/** One application call: when it was made, and how it ended. */
interface Call {
  at: number;
  result: 'ok' | 'failed' | 'throttled' | 'error';
}

/** Calls `api` at RATE per second for `ms`, open loop; resolves when every call has ended. */
async function load(api: Api, ms: number, calls: Call[], t0: number): Promise<void> {
  const pending: Array<Promise<void>> = [];
  const start = performance.now();
  let issued = 0;
  while (performance.now() - start < ms) {
    const due = Math.floor(((performance.now() - start) * RATE) / 1000);
    for (; issued < due; issued++) {
      const call: Call = { at: performance.now() - t0, result: 'error' };
      calls.push(call);
      pending.push(
        api(url).then(
          async (res) => {
            await res.arrayBuffer();
            call.result = res.ok ? 'ok' : 'failed';
          },
          (error: unknown) => {
            call.result =
              error instanceof RateLimitedError && error.reason === 'throttled' ? 'throttled' : 'error';
          },
        ),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await Promise.all(pending);
}

interface OutageResult {
  calls: number;
  hits: number;
  steadyCalls: number;
  steadyHits: number;
  recoveryHistories: number;
  recoveryGoodput: number;
}

async function outage(make: () => Api): Promise<OutageResult> {
  const api = make();
  const calls: Call[] = [];
  server.postMessage({ reset: true });
  const t0 = performance.now();
  await setServer(0, 'healthy');
  await load(api, HISTORY_MS, calls, t0);
  // The first history of the outage is when a throttler finds out; the rest is its steady state.
  await setServer(1, 'outage-start');
  const outageAt = performance.now() - t0;
  await load(api, HISTORY_MS, calls, t0);
  await setServer(1, 'outage-steady');
  await load(api, (OUTAGE - 1) * HISTORY_MS, calls, t0);
  await setServer(0, 'recovery');
  const recoveryAt = performance.now() - t0;
  await load(api, RECOVERY * HISTORY_MS, calls, t0);
  const counts = await serverCounts();
  const during = calls.filter((c) => c.at >= outageAt && c.at < recoveryAt);
  const steady = during.filter((c) => c.at >= outageAt + HISTORY_MS);
  // Back to full rate: from the first tenth of a history after which no tenth has more than 5 % rejected locally.
  const bin = HISTORY_MS / 10;
  const after = calls.filter((c) => c.at >= recoveryAt);
  const bins = Math.ceil((RECOVERY * HISTORY_MS) / bin);
  let back = 0;
  for (let i = 0; i < bins; i++) {
    const inBin = after.filter((c) => Math.floor((c.at - recoveryAt) / bin) === i);
    const rejected = inBin.filter((c) => c.result === 'throttled').length;
    if (inBin.length > 0 && rejected / inBin.length > 0.05) back = i + 1;
  }
  const hits = (phase: string) => counts[phase]?.hits ?? 0;
  return {
    calls: during.length,
    hits: hits('outage-start') + hits('outage-steady'),
    steadyCalls: steady.length,
    steadyHits: hits('outage-steady'),
    recoveryHistories: (back * bin) / HISTORY_MS,
    recoveryGoodput: after.filter((c) => c.result === 'ok').length / after.length,
  };
}

async function randomFailures(
  make: () => Api,
): Promise<{ goodput: number; hitsPerCall: number; throttled: number }> {
  const api = make();
  const calls: Call[] = [];
  server.postMessage({ reset: true });
  const t0 = performance.now();
  await setServer(0.1, 'random');
  await load(api, RANDOM_S * 1000, calls, t0);
  const counts = await serverCounts();
  return {
    goodput: calls.filter((c) => c.result === 'ok').length / calls.length,
    hitsPerCall: (counts.random?.hits ?? 0) / calls.length,
    throttled: calls.filter((c) => c.result === 'throttled').length,
  };
}

async function overload(make: () => Api): Promise<{ hitsPerAccept: number; goodput: number }> {
  const api = make();
  const calls: Call[] = [];
  server.postMessage({ reset: true });
  const t0 = performance.now();
  await setServer(0, 'overload-start', RATE * CAPACITY);
  await load(api, HISTORY_MS, calls, t0);
  await setServer(0, 'overload', RATE * CAPACITY);
  const steadyAt = performance.now() - t0;
  await load(api, (OUTAGE - 1) * HISTORY_MS, calls, t0);
  await setServer(0, 'idle');
  const c = (await serverCounts()).overload ?? { hits: 0, failed: 0 };
  const steady = calls.filter((x) => x.at >= steadyAt);
  return {
    hitsPerAccept: c.hits / Math.max(1, c.hits - c.failed),
    goodput: steady.filter((x) => x.result === 'ok').length / steady.length,
  };
}

const outages = contenders.map(() => [] as OutageResult[]);
const overloads = contenders.map(() => [] as Array<{ hitsPerAccept: number; goodput: number }>);
const randoms = contenders.map(
  () => [] as Array<{ goodput: number; hitsPerCall: number; throttled: number }>,
);
await randomFailures(contenders[0][1]); // warm up the sockets and the JIT
for (let round = 0; round < ROUNDS; round++) {
  const order = contenders.map((_, i) => i);
  if (round % 2 === 1) order.reverse();
  for (const i of order) outages[i].push(await outage(contenders[i][1]));
  for (const i of order) randoms[i].push(await randomFailures(contenders[i][1]));
  for (const i of order) overloads[i].push(await overload(contenders[i][1]));
}
await server.terminate();

const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const f2 = (x: number) => x.toFixed(2);
console.log(
  `node ${process.version}; ${RATE} calls/s; history ${HISTORY_MS} ms; outage ${OUTAGE} histories, recovery ${RECOVERY}; ${ROUNDS} rounds (means)`,
);
console.log('\nFull outage (every request fails with a 500), then recovery');
console.log(
  '| contender | server load per call, whole outage | after its first history | back to full rate after (histories, mean) | goodput after recovery |',
);
console.log('| --- | --- | --- | --- | --- |');
contenders.forEach(([name], i) => {
  const r = outages[i];
  const load = mean(r.map((x) => x.hits / x.calls));
  const steady = mean(r.map((x) => x.steadyHits / x.steadyCalls));
  const back = Math.max(...r.map((x) => x.recoveryHistories));
  const backMean = mean(r.map((x) => x.recoveryHistories));
  console.log(
    `| ${name} | ${f2(load)}× | ${f2(steady)}× | ${!adaptive(i) ? '0 (never throttles)' : back >= RECOVERY ? `not within ${RECOVERY}` : `${f2(backMean)} (worst round ${f2(back)})`} | ${f2(mean(r.map((x) => x.recoveryGoodput)))} |`,
  );
});
console.log(`\n10 % of requests failing at random, ${RANDOM_S} s per contender`);
console.log(
  '| contender | goodput (2xx per call) | ratio to the same retries without throttling | server load per call | calls throttled |',
);
console.log('| --- | --- | --- | --- | --- |');
contenders.forEach(([name, , baseline], i) => {
  const r = randoms[i];
  const goodput = mean(r.map((x) => x.goodput));
  const ratio =
    baseline === undefined ? '—' : `×${(goodput / mean(randoms[baseline].map((x) => x.goodput))).toFixed(3)}`;
  console.log(
    `| ${name} | ${f2(goodput)} | ${ratio} | ${f2(mean(r.map((x) => x.hitsPerCall)))}× | ${r.reduce((s, x) => s + x.throttled, 0)} |`,
  );
});
console.log(
  `\nOverload: the server accepts ${RATE * CAPACITY} requests/s of the ${RATE} calls/s offered, 503 past that (steady state)`,
);
console.log('| contender | requests reaching the server per request it accepted | goodput (2xx per call) |');
console.log('| --- | --- | --- |');
contenders.forEach(([name], i) => {
  const r = overloads[i];
  console.log(
    `| ${name} | ${f2(mean(r.map((x) => x.hitsPerAccept)))}× | ${f2(mean(r.map((x) => x.goodput)))} |`,
  );
});
