/**
 * `npm run bench:redis`: decisions per second and p50/p99 latency at 1 and 64 in flight, one Node process, one
 * ioredis connection, one redis-server started here (no persistence): floodgate's Redis store (per call and
 * coalesced, single limiter and a 2-member chain; by FCALL of its Redis Function) against the raw EVALSHA of a
 * minimal fixed-window script,
 * rate-limiter-flexible's RateLimiterRedis and rate-limit-redis; then redis-benchmark running the same scripts
 * (the server's own limit, with and without pipelining). Every request is granted (limits far above the load)
 * over 1000 keys, so each library does its full work per call. BENCH_MS sets each run's length (default 3000).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { fixedWindow, tokenBucket } from '../src/index.ts';
import { redisStore } from '../src/redis/index.ts';
import { encodeRequest, specText } from '../src/redis/protocol.ts';
import { DECIDE_SCRIPT } from '../src/redis/script.ts';
import { RedisServer } from '../test/support/redis-server.ts';

const run = promisify(execFile);
const DURATION = Number(process.env.BENCH_MS ?? 3000);
const KEYS = Array.from({ length: 1000 }, (_, i) => `k${i}`);
const RAW_FIXED_WINDOW = `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return c`;

type Decide = (key: string) => Promise<unknown>;

interface Row {
  name: string;
  inflight: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** redis-server CPU time (user + sys) per decision: steadier than throughput on a busy machine. */
  serverCpuUs: number;
}

/** redis-server's CPU time so far, in microseconds (INFO cpu). */
async function serverCpu(): Promise<number> {
  const info = String(await client.info('cpu'));
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
  return (user + sys) * 1e6;
}

async function measure(name: string, inflight: number, decide: Decide): Promise<Row> {
  const latencies: number[] = [];
  let n = 0;
  const warmUntil = performance.now() + Math.min(500, DURATION / 4);
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
  const cpuBefore = await serverCpu();
  const started = performance.now();
  await Promise.all(Array.from({ length: inflight }, loop));
  const elapsed = (performance.now() - started) / 1000;
  const serverCpuUs = ((await serverCpu()) - cpuBefore) / done;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { name, inflight, perSecond: done / elapsed, p50: at(0.5), p99: at(0.99), serverCpuUs };
}

function print(row: Row, baseline?: Row): void {
  const ratio = baseline ? `${((100 * row.perSecond) / baseline.perSecond).toFixed(0)} % of raw` : '';
  console.log(
    `  ${row.name.padEnd(46)} ${String(row.inflight).padStart(3)} in flight ${Math.round(row.perSecond).toLocaleString('en').padStart(9)} /s   p50 ${row.p50.toFixed(3)} ms   p99 ${row.p99.toFixed(3)} ms   server ${row.serverCpuUs.toFixed(1)} µs CPU/decision   ${ratio}`,
  );
}

const server = await RedisServer.start();
const client = new Redis({ port: server.port });
try {
  const rawSha = String(await client.script('LOAD', RAW_FIXED_WINDOW));
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
  const contenders: [string, Decide][] = [
    ['raw EVALSHA, fixed-window script (ioredis)', (k) => client.evalsha(rawSha, 1, `raw:${k}`, '60000')],
    ['floodgate fixedWindow, per call', (k) => fgPerCall.tryAcquire(k)],
    ['floodgate fixedWindow, coalesced', (k) => fgCoalesced.tryAcquire(k)],
    ['floodgate chain of 2, per call', (k) => chainPerCall.tryAcquire(k)],
    ['floodgate chain of 2, coalesced', (k) => chainCoalesced.tryAcquire(k)],
    ['rate-limiter-flexible RateLimiterRedis', (k) => rlf.consume(k)],
    ['rate-limit-redis', (k) => rlr.increment(k)],
  ];
  console.log(
    `floodgate/redis benchmark: Node ${process.version}, redis-server on port ${server.port}, ${DURATION} ms per run`,
  );
  for (const inflight of [1, 64]) {
    console.log(`\n${inflight} in flight`);
    let raw: Row | undefined;
    for (const [name, decide] of contenders) {
      const row = await measure(name, inflight, decide);
      raw ??= row;
      print(row, raw);
    }
  }

  // The server's own limit: redis-benchmark running the same scripts, 64 connections.
  const args: string[] = [];
  const spec = specText(fixedWindow({ permitLimit: limit, window: 60_000 }).algorithm, false, 1000, 30_000);
  encodeRequest(args, 't', 1, '', [
    { key: 'fg:{__rand_int__}', spec, origin: '', blocked: false, lease: '' },
  ]);
  const scripts: [string, string[]][] = [
    ['raw fixed-window script', ['EVALSHA', rawSha, '1', 'rb:__rand_int__', '60000']],
    [
      'floodgate decide script, 1 decision',
      ['EVALSHA', DECIDE_SCRIPT.sha, '1', 'fg:{__rand_int__}', '1', ...args],
    ],
    [
      'floodgate decide function, 1 decision',
      ['FCALL', DECIDE_SCRIPT.fn, '1', 'fg:{__rand_int__}', '1', ...args],
    ],
  ];
  console.log('\nredis-benchmark, 64 connections, 1000 keys');
  for (const [name, command] of scripts) {
    for (const pipeline of [1, 16]) {
      const { stdout } = await run('redis-benchmark', [
        '-p',
        String(server.port),
        '-c',
        '64',
        '-n',
        '200000',
        '-r',
        '1000',
        '-P',
        String(pipeline),
        '-q',
        ...command,
      ]);
      const perSecond = /([\d.]+) requests per second/.exec(stdout)?.[1];
      const p50 = /p50=([\d.]+)/.exec(stdout)?.[1];
      console.log(
        `  ${name.padEnd(46)} pipeline ${String(pipeline).padStart(2)} ${Math.round(Number(perSecond)).toLocaleString('en').padStart(9)} /s   p50 ${p50} ms`,
      );
    }
  }
} finally {
  client.disconnect();
  await server.stop();
}
