/**
 * Commands Redis runs per decision (`INFO commandstats` calls, the script's own commands: TIME, GET, SET…; not
 * the FCALL itself), one decision at a time over 50 keys already known: a lone fixed window, sliding window and
 * token bucket, chains on the two-number path and the general one, a concurrency acquire and release. Key
 * administration keeps a lock in the key's own state, so an unlocked key's row must not move.
 *
 *   node --import tsx bench/redis-commands.bench.ts            this checkout
 *   ROOT=<another floodgate checkout> …                        that one's src (a baseline)
 *   LOCKED=1 …                                                 the same decisions on locked keys
 */
import { Redis } from 'ioredis';
import { RedisServer } from '../test/support/redis-server.ts';

const root = process.env.ROOT ?? new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const { fixedWindow, slidingWindow, tokenBucket, concurrency } = await import(`${root}/src/index.ts`);
const { redisStore } = await import(`${root}/src/redis/index.ts`);
const server = await RedisServer.start();
const client = new Redis({ port: server.port });
const store = redisStore({ client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
const big = 1e9;
const mk = (name: string, spec: unknown) => store.partitioned({ name, key: (k: string) => k, limiter: spec });
const fw = mk('fw', fixedWindow({ permitLimit: big, window: 60_000 }));
const sw = mk('sw', slidingWindow({ permitLimit: big, window: 60_000, segmentsPerWindow: 6 }));
const tb = mk('tb', tokenBucket({ tokenLimit: big, tokensPerPeriod: 1, period: 1000 }));
const cc = mk('cc', concurrency({ permitLimit: big }));
const rows: [string, (k: string) => Promise<unknown>][] = [
  ['fixed window', (k) => fw.tryAcquire(k)],
  ['sliding window', (k) => sw.tryAcquire(k)],
  ['token bucket', (k) => tb.tryAcquire(k)],
  ['chain fw+tb (pair path)', (k) => store.chain(fw, tb).tryAcquire(k)],
  ['chain fw+sw (general)', (k) => store.chain(fw, sw).tryAcquire(k)],
  ['concurrency acquire+release', async (k) => (await cc.tryAcquire(k)).release()],
];
if (process.env.LOCKED) {
  const lfw = mk('lfw', fixedWindow({ permitLimit: big, window: 60_000 }));
  const ltb = mk('ltb', tokenBucket({ tokenLimit: big, tokensPerPeriod: 1, period: 1000 }));
  const lcc = mk('lcc', concurrency({ permitLimit: big }));
  const locking = (l: typeof lfw, run: (k: string) => Promise<unknown>) => {
    const locked = new Set<string>();
    return async (k: string) => {
      if (!locked.has(k)) {
        await run(k);
        await l.lock(k, '1h');
        locked.add(k);
      }
      return run(k);
    };
  };
  rows.length = 0;
  rows.push(['LOCKED fixed window', locking(lfw, (k) => lfw.tryAcquire(k))]);
  rows.push(['LOCKED chain fw+tb', locking(ltb, (k) => store.chain(lfw, ltb).tryAcquire(k))]);
  rows.push(['LOCKED concurrency', locking(lcc, (k) => lcc.tryAcquire(k))]);
}
async function total(): Promise<number> {
  const info = String(await client.info('commandstats'));
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(\w+(?:\|\w+)?):calls=(\d+)/g)) {
    if (!/^(info|fcall|evalsha|eval|function|script|config|client|hello|select|ping)/.test(m[1]))
      n += Number(m[2]);
  }
  return n;
}
for (const [name, run] of rows) {
  const keys = Array.from({ length: 50 }, (_, i) => `${name}-${i}`);
  for (const k of keys) await run(k); // warm: every key written and known
  await new Promise((r) => setTimeout(r, 100));
  const before = await total();
  const N = 10;
  for (let i = 0; i < N; i++) for (const k of keys) await run(k);
  await new Promise((r) => setTimeout(r, 100));
  const after = await total();
  console.log(
    `${name.padEnd(30)} ${((after - before) / (N * keys.length)).toFixed(2)} commands per decision`,
  );
}
client.disconnect();
await server.stop();
