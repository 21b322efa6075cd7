/**
 * `npm run bench:redis`: decisions per second and p50/p99 latency at 1 and 64 in flight, one Node process, one
 * ioredis connection, one redis-server started here (no persistence): floodgate's Redis store (per call and
 * coalesced: each algorithm, and a 2-member chain) against raw EVALSHA of fixed-window scripts,
 * rate-limiter-flexible's RateLimiterRedis and rate-limit-redis; then redis-benchmark running the same code (the
 * server's own limit, with and without pipelining).
 *
 * The baseline ("raw") is rate-limit-redis's own fixed-window script (PTTL, then SET … PX on a window's first hit
 * or INCR; answers the count and the time left) sent by plain `evalsha`: a real fixed window with nothing of a
 * library around it. A lighter script (INCR, PEXPIRE on the first hit; answers only the count) is shown too.
 *
 * Fairness: every contender uses the same client, server and 1000 keys; every request is granted (limits far
 * above the load), so each does its full work per call; contenders run in turn (the order rotated each round),
 * ROUNDS times (default 3), and a ratio is taken within a round, then the median over rounds is shown.
 * Wall-clock figures on a shared machine move with its load: the Node and Redis CPU time per decision are
 * printed beside them. BENCH_MS sets the length of each measurement (default 1000).
 *
 * Redis's own time per decision is read from `INFO commandstats` (the usec of EVAL/EVALSHA/FCALL, which include
 * the commands they call; CONFIG RESETSTAT before each measurement), for every algorithm coalesced, and the
 * targets of issue 13 printed per in-flight level; then a 2 000-decision burst in one tick at the default 50 ms
 * deadline, five times. INFLIGHT (default `1,64`) chooses the levels; REDIS_BENCHMARK=0 skips redis-benchmark.
 *
 * Floodgate is measured as published: built to dist/ first and imported from there (under tsx, esbuild's
 * keepNames would add a naming call to closures floodgate makes, a cost the published code does not have).
 *
 * BASELINE=<directory of another floodgate checkout> (e.g. `git archive main | tar -x -C /tmp/base`, with its
 * node_modules) builds that one too and measures its coalesced rows in the same rounds, alternating with these
 * ("baseline …"): before/after on one server, one client, the same load.
 */
import { execFile, execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { RedisServer } from '../test/support/redis-server.ts';
import { RAW_FIXED_WINDOW } from './redis-raw.ts';

/** Floodgate's module `path` (under src/, without extension) from the build in dist/. */
function built<T>(path: string): Promise<T> {
  return import(new URL(`../dist/${path}.js`, import.meta.url).href) as Promise<T>;
}
execFileSync('npm', ['run', '-s', 'build'], { cwd: new URL('..', import.meta.url), stdio: 'inherit' });
const { concurrency, fixedWindow, slidingWindow, tokenBucket } =
  await built<typeof import('../src/index.ts')>('index');
const { isUnavailableAnswer, redisStore } =
  await built<typeof import('../src/redis/index.ts')>('redis/index');
const { encodeRequest, specText } = await built<typeof import('../src/redis/protocol.ts')>('redis/protocol');
const { DECIDE_SCRIPT } = await built<typeof import('../src/redis/script.ts')>('redis/script');

// The same rows of another checkout (BASELINE), built and imported the same way.
const BASELINE = process.env.BASELINE;
type Floodgate = typeof import('../src/index.ts');
type FloodgateRedis = typeof import('../src/redis/index.ts');
let baseline: { fg: Floodgate; redis: FloodgateRedis } | undefined;
if (BASELINE) {
  execFileSync('npm', ['run', '-s', 'build'], { cwd: BASELINE, stdio: 'inherit' });
  const from = <T>(path: string) => import(`${BASELINE}/dist/${path}.js`) as Promise<T>;
  baseline = { fg: await from<Floodgate>('index'), redis: await from<FloodgateRedis>('redis/index') };
}

const run = promisify(execFile);
const DURATION = Number(process.env.BENCH_MS ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const INFLIGHT = (process.env.INFLIGHT ?? '1,64').split(',').map(Number);
const KEYS = Array.from({ length: 1000 }, (_, i) => `k${i}`);
const RAW_INCR = `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return c`;

type Decide = (key: string) => Promise<unknown>;

interface Sample {
  perSecond: number;
  p50: number;
  p99: number;
  /** redis-server's CPU time (user + sys) per decision. */
  serverUs: number;
  /** This process's CPU time per decision (the benchmark loop included). */
  nodeUs: number;
  /**
   * Redis's own time per decision in the scripts and Functions it ran (`INFO commandstats`: the usec of EVAL,
   * EVALSHA, FCALL, FCALL_RO, whose time includes the commands they call), independent of the client's noise.
   */
  statUs: number;
}

const SCRIPT_COMMANDS = ['eval', 'evalsha', 'fcall', 'fcall_ro'];

/** The usec Redis spent in scripts and Functions since the last CONFIG RESETSTAT. */
async function scriptUsec(): Promise<number> {
  const info = String(await client.info('commandstats'));
  let usec = 0;
  for (const name of SCRIPT_COMMANDS) {
    usec += Number(new RegExp(`cmdstat_${name}:calls=\\d+,usec=(\\d+)`).exec(info)?.[1] ?? 0);
  }
  return usec;
}

/** redis-server's CPU time so far, in microseconds (INFO cpu). */
async function serverCpu(): Promise<number> {
  const info = String(await client.info('cpu'));
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
  return (user + sys) * 1e6;
}

async function measure(inflight: number, decide: Decide): Promise<Sample> {
  const latencies: number[] = [];
  let n = 0;
  const warmUntil = performance.now() + Math.min(250, DURATION / 4);
  while (performance.now() < warmUntil) await decide(KEYS[n++ % KEYS.length]);
  const end = performance.now() + DURATION;
  let done = 0;
  const loop = async () => {
    while (performance.now() < end) {
      const started = performance.now();
      await decide(KEYS[n++ % KEYS.length]);
      latencies.push(performance.now() - started);
      done++;
    }
  };
  await client.call('CONFIG', 'RESETSTAT');
  const serverBefore = await serverCpu();
  const nodeBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: inflight }, loop));
  const elapsed = (performance.now() - started) / 1000;
  const node = process.cpuUsage(nodeBefore);
  const serverUs = ((await serverCpu()) - serverBefore) / done;
  const statUs = (await scriptUsec()) / done;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return {
    perSecond: done / elapsed,
    p50: at(0.5),
    p99: at(0.99),
    serverUs,
    nodeUs: (node.user + node.system) / done,
    statUs,
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

const server = await RedisServer.start();
const client = new Redis({ port: server.port });
try {
  const rawSha = String(await client.script('LOAD', RAW_FIXED_WINDOW));
  const incrSha = String(await client.script('LOAD', RAW_INCR));
  await client.script('LOAD', DECIDE_SCRIPT.source);
  await client.call('FUNCTION', 'LOAD', 'REPLACE', DECIDE_SCRIPT.library);
  const limit = 1_000_000_000;
  const perCall = redisStore({ client, coalesce: false, timeoutMs: 1000 });
  const coalesced = redisStore({ client, coalesce: true, timeoutMs: 1000 });
  const make = (store: typeof perCall, name: string) =>
    store.partitioned({
      name,
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: limit, window: 60_000 }),
    });
  const makeChain = (store: typeof perCall, name: string) =>
    store.chain(
      make(store, `${name}-a`),
      store.partitioned({
        name: `${name}-b`,
        key: (k: string) => k,
        limiter: tokenBucket({ tokenLimit: limit, tokensPerPeriod: limit, period: 60_000 }),
      }),
    );
  const makeOf = (name: string, limiter: Parameters<typeof coalesced.partitioned>[0]['limiter']) =>
    coalesced.partitioned({ name, key: (k: string) => k, limiter });
  const swCoalesced = makeOf(
    'sw',
    slidingWindow({ permitLimit: limit, window: 60_000, segmentsPerWindow: 6 }),
  );
  const tbCoalesced = makeOf(
    'tb',
    tokenBucket({ tokenLimit: limit, tokensPerPeriod: limit, period: 60_000 }),
  );
  const ccCoalesced = makeOf('cc', concurrency({ permitLimit: limit }));
  const fgPerCall = make(perCall, 'fg1');
  const fgCoalesced = make(coalesced, 'fg2');
  const chainPerCall = makeChain(perCall, 'fc1');
  const chainCoalesced = makeChain(coalesced, 'fc2');
  const rlf = new RateLimiterRedis({ storeClient: client, points: limit, duration: 60, keyPrefix: 'rlf' });
  const rlr = new RateLimitRedisStore({
    sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as never,
    prefix: 'rlr:',
  });
  rlr.init({ windowMs: 60_000 } as never);
  const RAW = 'raw EVALSHA, fixed-window script (PTTL, INCR)';
  // floodgate's own Lua, called as a user would call any Function: what the library around it costs is the
  // difference between this row and the per-call one.
  const loneSpec = specText(
    fixedWindow({ permitLimit: limit, window: 60_000 }).algorithm,
    false,
    1000,
    30_000,
  );
  const contenders: [string, Decide][] = [
    [RAW, (k) => client.evalsha(rawSha, 1, `raw:${k}`, '60000')],
    ['raw EVALSHA, INCR + PEXPIRE only', (k) => client.evalsha(incrSha, 1, `incr:${k}`, '60000')],
    [
      "floodgate's Lua by plain FCALL (no library)",
      (k) => client.call('FCALL', DECIDE_SCRIPT.fn, '1', `lua:${k}`, '1', loneSpec),
    ],
    ['floodgate fixedWindow, per call', (k) => fgPerCall.tryAcquire(k)],
    ['floodgate fixedWindow, coalesced', (k) => fgCoalesced.tryAcquire(k)],
    ['floodgate slidingWindow, coalesced', (k) => swCoalesced.tryAcquire(k)],
    ['floodgate tokenBucket, coalesced', (k) => tbCoalesced.tryAcquire(k)],
    [
      'floodgate concurrency, coalesced (+ release)',
      (k) => ccCoalesced.tryAcquire(k).then((lease) => lease.release()),
    ],
    ['floodgate chain of 2, per call', (k) => chainPerCall.tryAcquire(k)],
    ['floodgate chain of 2, coalesced', (k) => chainCoalesced.tryAcquire(k)],
    ['rate-limiter-flexible RateLimiterRedis', (k) => rlf.consume(k)],
    ['rate-limit-redis', (k) => rlr.increment(k)],
  ];
  if (baseline) {
    const b = baseline.fg;
    const store = baseline.redis.redisStore({ client, coalesce: true, timeoutMs: 1000 });
    const of = (name: string, limiter: Parameters<typeof store.partitioned>[0]['limiter']) =>
      store.partitioned({ name, key: (k: string) => k, limiter });
    const window = () => b.fixedWindow({ permitLimit: limit, window: 60_000 });
    const bucket = () => b.tokenBucket({ tokenLimit: limit, tokensPerPeriod: limit, period: 60_000 });
    const fw = of('bfw', window());
    const sw = of('bsw', b.slidingWindow({ permitLimit: limit, window: 60_000, segmentsPerWindow: 6 }));
    const tb = of('btb', bucket());
    const cc = of('bcc', b.concurrency({ permitLimit: limit }));
    const chain = store.chain(of('bfc-a', window()), of('bfc-b', bucket()));
    contenders.push(
      ['baseline fixedWindow, coalesced', (k) => fw.tryAcquire(k)],
      ['baseline slidingWindow, coalesced', (k) => sw.tryAcquire(k)],
      ['baseline tokenBucket, coalesced', (k) => tb.tryAcquire(k)],
      [
        'baseline concurrency, coalesced (+ release)',
        (k) => cc.tryAcquire(k).then((lease) => lease.release()),
      ],
      ['baseline chain of 2, coalesced', (k) => chain.tryAcquire(k)],
    );
  }
  console.log(
    `floodgate/redis benchmark: Node ${process.version}, redis-server on port ${server.port}, ${DURATION} ms per measurement, ${ROUNDS} rounds; load average ${load()}`,
  );
  for (const inflight of INFLIGHT) {
    const samples = new Map<string, Sample[]>(contenders.map(([name]) => [name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      // Rotated each round: a contender measured always in the same place of the round is measured under the
      // same phase of whatever recurs here (timers, major collections), which moved one contender by ~20 % when
      // two were alternated in a fixed order.
      for (let i = 0; i < contenders.length; i++) {
        const [name, decide] = contenders[(i + round) % contenders.length];
        samples.get(name)!.push(await measure(inflight, decide));
      }
    }
    console.log(
      `\n${inflight} in flight (median of ${ROUNDS} rounds; "of raw": the ratio to the raw script within each round)`,
    );
    const raw = samples.get(RAW)!;
    for (const [name] of contenders) {
      const s = samples.get(name)!;
      const ratio = median(s.map((x, i) => x.perSecond / raw[i].perSecond));
      const statRatio = median(s.map((x, i) => x.statUs / raw[i].statUs));
      const pick = (f: (x: Sample) => number) => median(s.map(f));
      console.log(
        `  ${name.padEnd(46)} ${Math.round(pick((x) => x.perSecond))
          .toLocaleString('en')
          .padStart(
            8,
          )} /s ${`${(100 * ratio).toFixed(0)} %`.padStart(6)} of raw   p50 ${pick((x) => x.p50).toFixed(3)} ms   p99 ${pick((x) => x.p99).toFixed(3)} ms   commandstats ${pick((x) => x.statUs).toFixed(2)} µs/decision (${statRatio.toFixed(2)}× raw)   CPU/decision: Redis ${pick((x) => x.serverUs).toFixed(1)} µs, Node ${pick((x) => x.nodeUs).toFixed(1)} µs`,
      );
    }
    // The targets of issue 13, within each round, median over rounds.
    const fg = samples.get('floodgate fixedWindow, coalesced')!;
    const rlfS = samples.get('rate-limiter-flexible RateLimiterRedis')!;
    const rlrS = samples.get('rate-limit-redis')!;
    const better = (i: number) => (rlfS[i].perSecond >= rlrS[i].perSecond ? rlfS[i] : rlrS[i]);
    const vsPeer = median(fg.map((x, i) => x.perSecond / better(i).perSecond));
    const p99Ratio = median(fg.map((x, i) => x.p99 / better(i).p99));
    if (baseline) {
      // This checkout against the baseline's, row by row, within each round.
      for (const row of ['fixedWindow', 'slidingWindow', 'tokenBucket', 'concurrency', 'chain of 2']) {
        const name = (who: string) =>
          contenders.find(([n]) => n.startsWith(`${who} ${row}`) && n.includes('coalesced'))![0];
        const now = samples.get(name('floodgate'))!;
        const before = samples.get(name('baseline'))!;
        const stat = median(now.map((x, i) => x.statUs / before[i].statUs));
        const rate = median(now.map((x, i) => x.perSecond / before[i].perSecond));
        console.log(
          `  against the baseline, ${row}: commandstats ${stat.toFixed(2)}× the baseline's per decision, decisions/s ${rate.toFixed(2)}×`,
        );
      }
    }
    console.log(
      `  targets: coalesced ${vsPeer.toFixed(2)}× the better peer (≥ 2.5), its p99 ${p99Ratio.toFixed(2)}× the better peer's (≤ 1); commandstats per decision against raw's per call (≤ 0.5, chain ≤ 1.0) in the column above`,
    );
  }

  // A burst of 2 000 decisions in one tick at the default deadline (50 ms), on partitions of one limiter, the
  // store fresh each time (nothing in flight before it); a pause past retryIntervalMs between bursts.
  const BURST = 2000;
  const bursts: string[] = [];
  for (let round = 0; round < 5; round++) {
    const store = redisStore({ client });
    const limiter = store.partitioned({
      name: `burst${round}`,
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: limit, window: 60_000 }),
    });
    const started = performance.now();
    const leases = await Promise.all(
      Array.from({ length: BURST }, (_, i) => limiter.tryAcquire(KEYS[i % 1000])),
    );
    const took = performance.now() - started;
    bursts.push(`${leases.filter((l) => isUnavailableAnswer(l)).length} in ${took.toFixed(1)} ms`);
    await new Promise((r) => setTimeout(r, 600));
  }
  console.log(
    `\nburst of ${BURST} in one tick, timeoutMs 50 (default), five bursts: onUnavailable answers ${bursts.join(', ')}; load average ${load()}`,
  );

  // The server's own limit: redis-benchmark running the same code, 64 connections, 1000 keys.
  const spec = specText(fixedWindow({ permitLimit: limit, window: 60_000 }).algorithm, false, 1000, 30_000);
  const request = (key: string) => {
    const args: string[] = [];
    encodeRequest(args, 't', 1, '', [{ key, spec, origin: '', blocked: false, lease: '' }]);
    return args;
  };
  const batch = (size: number) => {
    const keys: string[] = [];
    const args: string[] = [];
    for (let i = 0; i < size; i++) {
      keys.push(`fg:{__rand_int__}`);
      args.push(...request(''));
    }
    return ['FCALL', DECIDE_SCRIPT.fn, String(size), ...keys, String(size), ...args];
  };
  const commands: [string, string[], number][] = [
    ['raw fixed-window script', ['EVALSHA', rawSha, '1', 'rb:__rand_int__', '60000'], 1],
    ['raw INCR + PEXPIRE script', ['EVALSHA', incrSha, '1', 'ri:__rand_int__', '60000'], 1],
    [
      'floodgate script (Redis 6), 1 decision',
      ['EVALSHA', DECIDE_SCRIPT.sha, '1', 'fg:{__rand_int__}', '1', ...request('')],
      1,
    ],
    [
      'floodgate function, 1 decision',
      ['FCALL', DECIDE_SCRIPT.fn, '1', 'fg:{__rand_int__}', '1', ...request('')],
      1,
    ],
    ['floodgate function, batch of 64', batch(64), 64],
  ];
  console.log(`\nredis-benchmark, 64 connections, 1000 keys (decisions/s); load average ${load()}`);
  // REDIS_BENCHMARK=0 skips this part.
  for (const [name, command, per] of process.env.REDIS_BENCHMARK === '0' ? [] : commands) {
    for (const pipeline of [1, 16]) {
      const { stdout } = await run('redis-benchmark', [
        '-p',
        String(server.port),
        '-c',
        '64',
        '-n',
        String(Math.ceil(100_000 / per)),
        '-r',
        '1000',
        '-P',
        String(pipeline),
        '-q',
        ...command,
      ]);
      const perSecond = Number(/([\d.]+) requests per second/.exec(stdout)?.[1]) * per;
      const p50 = /p50=([\d.]+)/.exec(stdout)?.[1];
      console.log(
        `  ${name.padEnd(46)} pipeline ${String(pipeline).padStart(2)} ${Math.round(perSecond).toLocaleString('en').padStart(9)} /s   p50 ${p50} ms per call`,
      );
    }
  }
  console.log(`\nload average ${load()}`);
} finally {
  client.disconnect();
  await server.stop();
}
