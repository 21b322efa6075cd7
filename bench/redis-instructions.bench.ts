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
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
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
/** Per row, one decision's keys and arguments (the protocol's short forms, see src/redis/protocol.ts). */
const ROWS: Record<string, (key: string, id: string) => [string[], string[]]> = {
  fixedWindow: (k) => [[k], [FW]],
  slidingWindow: (k) => [[k], [`sw:${LIMIT}:60000:6:0:1000:30000`]],
  tokenBucket: (k) => [[k], [TB]],
  'concurrency (+ release)': (k, id) => [
    [k, k],
    ['t', '1', '1', '', CC, '', '0', `1:${id}`, 'x', '0', '1', '', CC, '', '0', `1:${id}`],
  ],
  'chain of 2 (fixed window, bucket)': (k) => [
    [`${k}:a`, `${k}:b`],
    ['B', '2', FW, TB],
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
  const libs: { root: string; fn: string }[] = [];
  for (const root of roots) {
    const { DECIDE_SCRIPT } = (await import(
      `${root}/src/redis/script.ts`
    )) as typeof import('../src/redis/script.ts');
    await client.call('FUNCTION', 'LOAD', 'REPLACE', DECIDE_SCRIPT.library);
    libs.push({ root, fn: DECIDE_SCRIPT.fn });
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
            const [k, a] = decision(
              `fg${libs.indexOf(lib)}:${row.slice(0, 2)}:{k${(i * 64 + d) % 200}}`,
              `L${i}.${d}`,
            );
            keys.push(...k);
            args.push(...a);
            requests += row.startsWith('concurrency') ? 2 : 1;
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
} finally {
  client.disconnect();
  server.kill('SIGTERM');
}
