/**
 * What a decision costs Redis itself, in instructions (callgrind), which no other load on the machine can move:
 * `INFO commandstats` times are wall-clock inside redis-server and grow with the machine's load.
 *
 *   npm run bench:redis:instructions
 *   BASELINE=<directory of another floodgate checkout> (its Lua measured too, side by side)
 *
 * One redis-server under `valgrind --tool=callgrind`, counting only inside `fcallCommand` and
 * `evalShaCommand` (what `INFO commandstats` times for FCALL and EVALSHA, the commands their scripts call
 * included). Each checkout's decision code is loaded as its Function and sent the calls coalescing sends: batches
 * of 64 decisions, one try of one permit each on Redis's clock, over 200 keys, every request granted (limits of
 * 10⁹). Per row: 20 batches to warm (every key written and known), then 30 batches between
 * `callgrind_control --zero` and `--dump`; instructions divided by the decisions. The concurrency row acquires
 * and releases (two requests per decision, as `bench:redis` does). "raw" is rate-limit-redis's fixed-window
 * script sent per call by EVALSHA (2 000 calls), the baseline of issue 13.
 *
 *   FLOORS=1: also the floors — hand-written Functions doing only the Redis work each algorithm's semantics need
 *   per decision, in the same batches of 64 (one argument per decision, `TIME` once per batch, three integers
 *   answered per decision, the reply an array of integers Redis writes in C): see {@link FLOOR_LIBRARY}.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { Op } from '../src/redis/protocol.ts';
import { RAW_FIXED_WINDOW } from './redis-raw.ts';

const here = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const roots = [here, ...(process.env.BASELINE ? [process.env.BASELINE] : [])];
const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-cg-'));
const port = 17_000 + Math.floor(Math.random() * 1000);
const server = spawn(
  'valgrind',
  [
    '--tool=callgrind',
    '--toggle-collect=fcallCommand',
    '--toggle-collect=evalShaCommand',
    `--callgrind-out-file=${dir}/cg.out.%p`,
    'redis-server',
    '--port',
    String(port),
    '--save',
    '',
    '--appendonly',
    'no',
  ],
  { cwd: dir, stdio: 'ignore' },
);
const client = new Redis({ port, retryStrategy: () => 200, maxRetriesPerRequest: null });
client.on('error', () => {});
for (;;) {
  try {
    await client.ping();
    break;
  } catch {
    await new Promise((r) => setTimeout(r, 300));
  }
}

const LIMIT = 1_000_000_000;
const FW = `fw:${LIMIT}:60000::0:1000:30000`;
const TB = `tb:${LIMIT}:${LIMIT}:60000:0:1000:30000`;
const CC = `cc:${LIMIT}:::0:1000:30000`;
/** One request of a row: op, permits, and its members' keys, specs and lease ('' none). */
type Req = { op: Op; permits: number; members: { key: string; spec: string; lease: string }[] };
/** Per row, one decision's requests (each checkout encodes them with its own src/redis/protocol.ts). */
const ROWS: Record<string, (key: string, id: string) => Req[]> = {
  fixedWindow: (k) => [{ op: 't', permits: 1, members: [{ key: k, spec: FW, lease: '' }] }],
  slidingWindow: (k) => [
    { op: 't', permits: 1, members: [{ key: k, spec: `sw:${LIMIT}:60000:6:0:1000:30000`, lease: '' }] },
  ],
  tokenBucket: (k) => [{ op: 't', permits: 1, members: [{ key: k, spec: TB, lease: '' }] }],
  'concurrency (+ release)': (k, id) => [
    { op: 't', permits: 1, members: [{ key: k, spec: CC, lease: `1:${id}` }] },
    { op: 'x', permits: 0, members: [{ key: k, spec: CC, lease: `1:${id}` }] },
  ],
  'chain of 2 (fixed window, bucket)': (k) => [
    {
      op: 't',
      permits: 1,
      members: [
        { key: `${k}:a`, spec: FW, lease: '' },
        { key: `${k}:b`, spec: TB, lease: '' },
      ],
    },
  ],
};

/**
 * The floors: what no implementation of the algorithm can avoid asking Redis per decision.
 * - `floor_write`: one write that keeps the key's TTL and answers what was there (`SET … GET KEEPTTL` of a short
 *   string): a fixed window, a token bucket and a sliding window each need at least one read-and-write of their
 *   state per decision; a chain of two, two of them.
 * - `floor_lease`: a crash-safe concurrency lease: acquire = `ZCOUNT` of the live leases (the decision), `ZADD`
 *   of the lease scored by its expiry, `PEXPIRE` of the key (it must go when its holders die); release = `ZREM`.
 * - `floor_lease_bare`: `ZADD` on acquire and `ZREM` on release alone (no count, no key expiry): below what is
 *   crash-safe, the lower bound of any lease.
 */
const FLOOR_LIBRARY = `#!lua name=floodgate_floors
-- redis.call bound by the first call (loading a library sees no redis.call).
local call
local function now()
  call = redis.call
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.register_function('floor_write', function(keys, args)
  now()
  local out, o = {}, 0
  for i = 1, #keys do
    call('SET', keys[i], args[i], 'GET', 'KEEPTTL')
    out[o + 1], out[o + 2], out[o + 3] = 1, 999, 60000
    o = o + 3
  end
  return out
end)
redis.register_function('floor_lease', function(keys, args)
  local t = now()
  local out, o = {}, 0
  for i = 1, #keys, 2 do
    local key = keys[i]
    local held = call('ZCOUNT', key, t, '+inf')
    call('ZADD', key, t + 30000, args[i])
    call('PEXPIRE', key, 31000)
    call('ZREM', keys[i + 1], args[i + 1])
    out[o + 1], out[o + 2], out[o + 3] = 1, held, 0
    o = o + 3
  end
  return out
end)
redis.register_function('floor_lease_bare', function(keys, args)
  local t = now()
  local out, o = {}, 0
  for i = 1, #keys, 2 do
    call('ZADD', keys[i], t + 30000, args[i])
    call('ZREM', keys[i + 1], args[i + 1])
    out[o + 1], out[o + 2], out[o + 3] = 1, 0, 0
    o = o + 3
  end
  return out
end)
`;
/** The floors' rows: function, and per decision its keys and arguments (two of each for a lease or a chain). */
const FLOORS: Record<string, [string, (key: string, id: string) => [string[], string[]]]> = {
  'one write (fixed/sliding window, bucket)': ['floor_write', (k) => [[k], ['x']]],
  'lease: ZCOUNT+ZADD+PEXPIRE, ZREM': [
    'floor_lease',
    (k, id) => [
      [k, k],
      [id, id],
    ],
  ],
  'lease, bare: ZADD, ZREM': [
    'floor_lease_bare',
    (k, id) => [
      [k, k],
      [id, id],
    ],
  ],
  'chain of 2: two writes': [
    'floor_write',
    (k) => [
      [`${k}:a`, `${k}:b`],
      ['x', 'x'],
    ],
  ],
};

const control = (flag: string) =>
  execFileSync('callgrind_control', [flag, String(server.pid)], { cwd: dir, stdio: 'ignore' });
/** Instructions per decision of `calls(i)` (n calls of `per` decisions each), after 20 calls to warm. */
async function measure(call: (i: number) => string[], n: number, per: number): Promise<number> {
  for (let i = 0; i < 20; i++) await client.call(...(call(i) as [string]));
  control('--zero');
  for (let i = 0; i < n; i++) await client.call(...(call(20 + i) as [string]));
  control('--dump');
  const dumps = readdirSync(dir)
    .filter((f) => f.startsWith('cg.out.'))
    .sort((a, b) => a.length - b.length || a.localeCompare(b));
  const text = readFileSync(join(dir, dumps.at(-1)!), 'utf8');
  return Number(/^(?:summary|totals): (\d+)/m.exec(text)?.[1]) / (n * per);
}

try {
  const libs: {
    root: string;
    fn: string;
    encode: typeof import('../src/redis/protocol.ts').encodeRequest;
  }[] = [];
  for (const root of roots) {
    const { DECIDE_SCRIPT } = (await import(
      `${root}/src/redis/script.ts`
    )) as typeof import('../src/redis/script.ts');
    const { encodeRequest } = (await import(
      `${root}/src/redis/protocol.ts`
    )) as typeof import('../src/redis/protocol.ts');
    await client.call('FUNCTION', 'LOAD', 'REPLACE', DECIDE_SCRIPT.library);
    libs.push({ root, fn: DECIDE_SCRIPT.fn, encode: encodeRequest });
  }
  const rawSha = String(await client.script('LOAD', RAW_FIXED_WINDOW));
  const raw = await measure((i) => ['EVALSHA', rawSha, '1', `raw:${i % 200}`, '60000'], 2000, 1);
  console.log(`instructions per decision in redis-server (callgrind), batches of 64; raw ${Math.round(raw)}`);
  for (const [row, decision] of Object.entries(ROWS)) {
    const cells: string[] = [];
    for (const lib of libs) {
      const per = await measure(
        (i) => {
          const keys: string[] = [];
          const args: string[] = [];
          let requests = 0;
          for (let d = 0; d < 64; d++) {
            const reqs = decision(
              `fg${libs.indexOf(lib)}:${row.slice(0, 2)}:{k${(i * 64 + d) % 200}}`,
              `L${i}.${d}`,
            );
            for (const q of reqs) {
              for (const m of q.members) keys.push(m.key);
              const calls = q.members.map((m) => ({ ...m, origin: '', blocked: false }));
              lib.encode(args, q.op, q.permits, '', calls);
              requests++;
            }
          }
          return ['FCALL', lib.fn, String(keys.length), ...keys, String(requests), ...args];
        },
        30,
        64,
      );
      cells.push(
        `${lib.root === here ? 'this' : 'baseline'} ${Math.round(per)} (${(per / raw).toFixed(2)}× raw)`,
      );
    }
    console.log(`  ${row.padEnd(36)} ${cells.join('   ')}`);
  }
  if (process.env.FLOORS === '1') {
    await client.call('FUNCTION', 'LOAD', 'REPLACE', FLOOR_LIBRARY);
    console.log('floors (hand-written Functions, the Redis work alone):');
    for (const [row, [fn, decision]] of Object.entries(FLOORS)) {
      const per = await measure(
        (i) => {
          const keys: string[] = [];
          const args: string[] = [];
          for (let d = 0; d < 64; d++) {
            const [k, a] = decision(`fl:${fn}:${row.slice(0, 2)}:{k${(i * 64 + d) % 200}}`, `1:L${i}.${d}`);
            keys.push(...k);
            args.push(...a);
          }
          return ['FCALL', fn, String(keys.length), ...keys, ...args];
        },
        30,
        64,
      );
      console.log(`  ${row.padEnd(42)} ${Math.round(per)} (${(per / raw).toFixed(2)}× raw)`);
    }
  }
} finally {
  client.disconnect();
  server.kill('SIGTERM');
}
