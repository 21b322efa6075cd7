/**
 * `floodgate keys` against a real redis-server and a real 3-master Cluster: list (paged, SCAN), show, lock,
 * unlock and reset of a Redis partitioned limiter's keys, seen by the limiter itself; refusals (a limiter with no
 * keys, a prefix not in floodgate's format, a key that is not floodgate's); usage errors that name the flag.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { parseCommand, UsageError } from '../../src/cli/args.ts';
import { runKeys } from '../../src/cli/keys.ts';
import { concurrency, fixedWindow } from '../../src/index.ts';
import { redisStore } from '../../src/redis/index.ts';
import { RedisCluster, RedisServer } from '../support/redis-server.ts';

const parse = (...argv: string[]) => parseCommand(['keys', ...argv], 9);

function usage(...argv: string[]): string {
  try {
    parse(...argv);
  } catch (e) {
    assert.ok(e instanceof UsageError, String(e));
    return e.message;
  }
  assert.fail(`${argv.join(' ')} was accepted`);
}

/** Runs `floodgate keys …` in this process; its exit code and output. */
async function keys(...argv: string[]) {
  const command = parse(...argv);
  assert.equal(command.kind, 'keys');
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (d) => (stdout += d));
  err.on('data', (d) => (stderr += d));
  const code = await runKeys((command as { options: Parameters<typeof runKeys>[0] }).options, { out, err });
  return { code, stdout, stderr };
}

describe('floodgate keys: the command line', () => {
  test('usage errors name the flag or the argument', () => {
    assert.match(usage(), /keys: which action\?/);
    assert.match(usage('drop', 'login'), /unknown action "drop"/);
    assert.match(usage('show', 'login', 'alice'), /give --redis <url> or --cluster/);
    assert.match(usage('show', 'login', '--redis', 'redis://h:1'), /show needs a key/);
    assert.match(usage('list', '--redis', 'redis://h:1'), /which limiter\?/);
    assert.match(usage('lock', 'login', 'alice', '--redis', 'redis://h:1'), /lock needs --for <time>/);
    assert.match(usage('lock', 'login', 'a', '--redis', 'redis://h:1', '--for', 'ever'), /--for must be/);
    assert.match(usage('reset', 'login', 'a', '--redis', 'redis://h:1', '--for', '1m'), /--for is for lock/);
    assert.match(usage('lock', 'login', 'a', '--redis', 'redis://h:1', '--for', '1e13'), /--for must be/);
    assert.match(usage('show', 'login', 'a', '--redis', 'http://h'), /--redis must be a redis:\/\//);
    assert.match(usage('show', 'login', 'a', '--cluster', 'h'), /--cluster takes host:port/);
    assert.match(usage('show', 'login', 'a', '--redis', 'redis://h:1', '--cluster', 'h:1'), /not both/);
    assert.match(
      usage('list', 'login', '--redis', 'redis://h:1', '--prefix', 'fg{x}:'),
      /--prefix .* not in floodgate's key format/,
    );
    assert.match(usage('list', 'login', '--redis', 'redis://h:1', '--count', '0'), /--count must be/);
    assert.match(
      usage('show', 'login', 'a', '--redis', 'redis://h:1', '--count', '5'),
      /--count is for list/,
    );
    assert.match(
      usage('list', 'login', '--redis', 'redis://h:1', '--cusor', 'x'),
      /unknown option "--cusor"; did you mean "--cursor"\?/,
    );
    assert.match(usage('show', 'log{in', 'a', '--redis', 'redis://h:1'), /no braces/);
  });

  test('the process: a usage error exits 2 and says where to look', async () => {
    const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
    const failed = await promisify(execFile)(process.execPath, [
      '--import',
      'tsx',
      main,
      'keys',
      'lock',
      'login',
      'a',
      '--redis',
      'redis://h:1',
    ]).catch((e: { code: number; stderr: string }) => e);
    assert.equal((failed as { code: number }).code, 2);
    assert.match(
      (failed as { stderr: string }).stderr,
      /lock needs --for <time>[\s\S]*floodgate keys --help/,
    );
  });
});

describe('floodgate keys: a real redis-server', () => {
  let server: RedisServer;
  let client: Redis;
  before(async () => {
    server = await RedisServer.start();
    client = new Redis({ port: server.port });
  });
  after(async () => {
    client.disconnect();
    await server.stop();
  });
  const url = () => `redis://127.0.0.1:${server.port}`;

  test('list (paged), show, lock, unlock, reset: what the limiter then decides', async () => {
    const store = redisStore({ client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
    const login = store.partitioned({
      name: 'login',
      key: (k: string) => k,
      limiter: fixedWindow({ permitLimit: 5, window: '1m' }),
    });
    for (const user of ['alice', 'bob', 'carol', 'dave', 'erin']) await login.tryAcquire(user);

    const seen = new Set<string>();
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await keys(
        'list',
        'login',
        '--redis',
        url(),
        '--count',
        '2',
        '--json',
        ...(cursor ? ['--cursor', cursor] : []),
      );
      assert.equal(page.code, 0, page.stderr);
      const body = JSON.parse(page.stdout) as {
        keys: { key: string; found: boolean }[];
        cursor: string | null;
      };
      for (const k of body.keys) seen.add(k.key);
      cursor = body.cursor;
      pages++;
    } while (cursor !== null && pages < 20);
    assert.deepEqual([...seen].sort(), ['alice', 'bob', 'carol', 'dave', 'erin']);

    const text = await keys('list', 'login', '--redis', url());
    assert.match(text.stdout, /"alice" {2}not locked {2}back to full within 1m \d+s\n/);
    assert.match(text.stdout, /\(5 keys; that is all\)/);

    const locked = await keys('lock', 'login', 'alice', '--redis', url(), '--for', '15m');
    assert.equal(locked.code, 0, locked.stderr);
    assert.match(locked.stdout, /lock "alice": done\n"alice" {2}LOCKED for 1[45]m/);
    const lease = await login.tryAcquire('alice');
    assert.equal(lease.reason, 'locked');
    assert.ok(lease.retryAfterMs! > 890_000 && lease.retryAfterMs! <= 900_000, String(lease.retryAfterMs));
    assert.ok((await login.state('alice'))!.lockedForMs > 890_000, 'the store reads the lock the CLI wrote');

    const shown = JSON.parse((await keys('show', 'login', 'alice', '--redis', url(), '--json')).stdout);
    assert.equal(shown.found, true);
    assert.ok(shown.lockedForMs > 890_000);
    assert.equal(shown.kind, 'time-based');

    assert.equal((await keys('unlock', 'login', 'alice', '--redis', url())).code, 0);
    const after = await login.tryAcquire('alice');
    assert.ok(after.granted);
    assert.equal(after.remaining, 3, 'unlocked with its window as it was');

    assert.equal((await keys('reset', 'login', 'alice', '--redis', url())).code, 0);
    assert.equal(await login.state('alice'), undefined);
    assert.match((await keys('show', 'login', 'alice', '--redis', url())).stdout, /not in Redis/);
    await login.lock('zed', '1m');
    await keys('reset', 'login', 'zed', '--redis', url());
    assert.ok((await login.tryAcquire('zed')).granted, 'reset ends a lock the store wrote');
  });

  test('a concurrency limiter: held leases shown, a lock the limiter honours, reset keeps the leases', async () => {
    const store = redisStore({ client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
    const slots = store.partitioned({
      name: 'slots',
      key: (k: string) => k,
      limiter: concurrency({ permitLimit: 2 }),
    });
    const held = await slots.tryAcquire('acme');
    const shown = JSON.parse((await keys('show', 'slots', 'acme', '--redis', url(), '--json')).stdout);
    assert.equal(shown.kind, 'concurrency');
    assert.equal(shown.heldPermits, 1);
    await keys('lock', 'slots', 'newcomer', '--redis', url(), '--for', '1m');
    assert.equal(
      (await slots.tryAcquire('newcomer')).reason,
      'locked',
      'a key never seen locked as its kind',
    );
    await keys('lock', 'slots', 'acme', '--redis', url(), '--for', '1m');
    assert.equal((await slots.tryAcquire('acme')).reason, 'locked');
    await keys('reset', 'slots', 'acme', '--redis', url());
    assert.equal((await slots.state('acme'))?.remaining, 1, 'the held lease stays held');
    held.release();
  });

  test('refusals: no keys under that name or prefix, a key that is not floodgate’s', async () => {
    const none = await keys('list', 'logni', '--redis', url());
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /no floodgate keys of limiter "logni" under prefix "floodgate:" \(SCAN found none\)/,
    );
    const other = await keys('reset', 'login', 'bob', '--redis', url(), '--prefix', 'myapp:');
    assert.equal(other.code, 1, 'nothing reset under a prefix with no floodgate keys');
    assert.match(other.stderr, /refusing to go on/);
    await client.set('floodgate:{mallory}:login', 'not a state');
    const foreign = await keys('reset', 'login', 'mallory', '--redis', url());
    assert.equal(foreign.code, 1);
    assert.match(foreign.stderr, /is not a floodgate key .*refusing to touch it/);
    assert.equal(await client.get('floodgate:{mallory}:login'), 'not a state', 'left alone');
    await client.hset('floodgate:{hash}:login', 'a', '1');
    assert.match(
      (await keys('show', 'login', 'hash', '--redis', url())).stderr,
      /a Redis hash of another format/,
    );
  });
});

describe('floodgate keys: a real Cluster', () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await RedisCluster.start(3);
  });
  after(() => cluster.stop());

  test('list scans every master; lock and unlock reach the key’s master', async () => {
    const client = new Cluster(cluster.nodes.map((n) => ({ host: n.host, port: n.port })));
    try {
      const store = redisStore({ client, timeoutMs: 3000, onUnavailable: 'fail-closed' });
      const api = store.partitioned({
        name: 'api',
        key: (k: string) => k,
        limiter: fixedWindow({ permitLimit: 5, window: '1m' }),
      });
      const users = Array.from({ length: 30 }, (_, i) => `user-${i}`);
      for (const user of users) await api.tryAcquire(user);
      const seeds = cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
      const seen = new Set<string>();
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await keys(
          'list',
          'api',
          '--cluster',
          seeds,
          '--count',
          '7',
          '--json',
          ...(cursor ? ['--cursor', cursor] : []),
        );
        assert.equal(page.code, 0, page.stderr);
        const body = JSON.parse(page.stdout) as { keys: { key: string }[]; cursor: string | null };
        for (const k of body.keys) seen.add(k.key);
        cursor = body.cursor;
        pages++;
      } while (cursor !== null && pages < 50);
      assert.equal(seen.size, 30, 'every master scanned');
      for (const user of ['user-1', 'user-2', 'user-3']) {
        assert.equal((await keys('lock', 'api', user, '--cluster', seeds, '--for', '2m')).code, 0);
        assert.equal((await api.tryAcquire(user)).reason, 'locked');
        assert.equal((await keys('unlock', 'api', user, '--cluster', seeds)).code, 0);
        assert.ok((await api.tryAcquire(user)).granted);
      }
    } finally {
      client.disconnect();
    }
  });
});
