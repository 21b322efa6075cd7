/**
 * Leased concurrency permits across real processes (issue 26): four Node processes share one leased
 * `concurrency(...)` on a real redis-server, each with more requests in flight than its share; one is SIGKILLed
 * while it holds permits. Every permit held is written down as the wall-clock interval in which it was certainly
 * held. Checked: at no instant are more permits certainly held than the limit; the dead process's entry leaves
 * Redis within its lease TTL (not before the TTL from its last write), after which the survivors hold the whole
 * limit between them.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RedisServer } from '../support/redis-server.ts';
import type { PermitLeaseJob, PermitLeaseReport } from './fixtures/permit-lease-worker.ts';

const WORKER = fileURLToPath(new URL('./fixtures/permit-lease-worker.ts', import.meta.url));
const WORKERS = 4;
let server: RedisServer;
let client: Redis;
let dir: string;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  dir = mkdtempSync(join(tmpdir(), 'floodgate-permit-leases-'));
});
after(async () => {
  client.disconnect();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function startWorker(): Promise<ChildProcess> {
  const child = fork(WORKER, [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise((resolve) => child.once('message', resolve));
  return child;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const wall = () => performance.timeOrigin + performance.now();

/** The most intervals that share one instant, and the same among those that start at or after `from`. */
function mostAtOnce(intervals: [number, number][], from = Number.NEGATIVE_INFINITY): number {
  const events: [number, number][] = [];
  for (const [lo, hi] of intervals) if (lo >= from) events.push([lo, 1], [hi, -1]);
  // At a tie an end goes first: intervals that only touch are not held at once.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of events) {
    now += d;
    most = Math.max(most, now);
  }
  return most;
}

test(`concurrency: ${WORKERS} processes on one leased limiter never hold more than the limit at once; a SIGKILLed one's permits come back after the lease TTL`, async () => {
  const limit = 20;
  const leaseTtlMs = 600;
  const name = 'permit-lp';
  const key = `floodgate:{${name}}${name}`;
  const children = await Promise.all(Array.from({ length: WORKERS }, startWorker));
  const files = children.map((_, i) => join(dir, `permits-${i}`));
  for (const f of files) writeFileSync(f, '');
  const holders: string[] = [];
  const reports = children.map(
    (child, i) =>
      new Promise<PermitLeaseReport | undefined>((resolve) => {
        child.once('exit', () => resolve(undefined));
        child.on('message', (m) => {
          if ((m as { holder?: string }).holder !== undefined) holders[i] = (m as { holder: string }).holder;
          else resolve(m as PermitLeaseReport);
        });
        const job: PermitLeaseJob = {
          port: server.port,
          name,
          limit,
          leaseTtlMs,
          durationMs: 3000,
          inflight: 10,
          holdMs: 20,
          file: files[i],
        };
        child.send(job);
      }),
  );
  let killedAt = 0;
  let goneAt = 0;
  let victim = 2;
  let lastScore = 0;
  try {
    await sleep(1000);
    // The victim is a process that holds permits now (with 40 wanted of 20, one may hold none for a while):
    // read the entries, kill one whose entry is there, and read again once it is dead, when only its TTL
    // removes it.
    let entries: string[] = [];
    for (let i = 0; i < 400; i++) {
      entries = await client.zrange(key, '0', '-1');
      if (holders.some((h) => entries.some((e) => e.endsWith(`:${h}/b`)))) break;
      await sleep(5);
    }
    victim = Math.max(
      0,
      holders.findIndex((h) => entries.some((e) => e.endsWith(`:${h}/b`))),
    );
    const dead = `:${holders[victim]}/b`;
    children[victim].kill('SIGKILL');
    killedAt = wall();
    const after = await client.zrange(key, '0', '-1');
    assert.ok(
      after.some((e) => e.endsWith(dead)),
      'the killed process held permits',
    );
    // Its entry stays until the TTL from its last write, then leaves.
    while (wall() - killedAt < 3 * leaseTtlMs) {
      const entries = await client.zrange(key, '0', '-1', 'WITHSCORES');
      const at = entries.findIndex((e) => e.endsWith(dead));
      if (at < 0) {
        goneAt = wall();
        break;
      }
      lastScore = Number(entries[at + 1]);
      await sleep(10);
    }
    const done = await Promise.all(reports);
    assert.equal(done[victim], undefined, 'the killed worker never reported');
    for (const [i, r] of done.entries()) if (i !== victim) assert.ok(r !== undefined, `worker ${i} reported`);
    assert.equal(
      done.reduce((n, r) => n + (r?.errors ?? 0), 0),
      0,
      'no decision fell back to onUnavailable',
    );
  } finally {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  assert.ok(goneAt > 0, 'the dead entry left Redis');
  const back = goneAt - killedAt;
  assert.ok(back <= leaseTtlMs + 100, `the dead permits came back ${back} ms after the kill`);
  assert.ok(goneAt >= lastScore - 5, 'not before its expiry');
  const intervals: [number, number][] = [];
  const survivors: [number, number][] = [];
  for (const [i, f] of files.entries()) {
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      if (line === '') continue;
      const [lo, hi] = line.split(',').map(Number);
      intervals.push([lo, hi]);
      if (i !== victim) survivors.push([lo, hi]);
    }
  }
  const most = mostAtOnce(intervals);
  const after = mostAtOnce(survivors, goneAt + 100);
  console.log(
    `concurrency leases: ${intervals.length} permits held, at most ${most} at once (limit ${limit}); the dead process's came back ${Math.round(back)} ms after SIGKILL (TTL ${leaseTtlMs}); survivors then held ${after} at once`,
  );
  assert.ok(most <= limit, `${most} permits held at once > ${limit}`);
  assert.ok(after >= limit - 2, `the survivors held at most ${after} at once after the dead entry left`);
});
