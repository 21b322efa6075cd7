/**
 * Leased decisions across real processes (issue 26): four Node processes decide on one hot key of a real
 * redis-server, each from its own batches, while the test SIGSTOPs one of them for two windows and SIGKILLs
 * another mid-window. Every grant is written down as it happens; per window of Redis's clock (the same machine
 * clock), the grants of all processes together are at most the limit.
 *
 * Each grant is written down with the mark of the batch it came from (the window or segment Redis counted it
 * in), and a grant made inside the call also with the wall clock readings around it. Checked: per window
 * (fixed) and per run of `segments` consecutive segments (sliding), the grants of all processes together, by
 * the segment that counted them, are at most the limit; and every grant whose time is known to the millisecond
 * was made inside the segment that counted it (Redis `TIME` and `Date.now()` read the same clock here).
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
import type { LeaseJob, LeaseReport } from './fixtures/lease-worker.ts';

const WORKER = fileURLToPath(new URL('./fixtures/lease-worker.ts', import.meta.url));
const WORKERS = 4;
let server: RedisServer;
let client: Redis;
let dir: string;
before(async () => {
  server = await RedisServer.start();
  client = new Redis({ port: server.port });
  dir = mkdtempSync(join(tmpdir(), 'floodgate-leases-'));
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

for (const kind of ['fixed', 'sliding'] as const) {
  test(`${kind} window: ${WORKERS} processes on one leased key, one SIGSTOPped for two windows and one SIGKILLed mid-window, never admit more than the limit per window`, async () => {
    const windowMs = 400;
    const segments = kind === 'fixed' ? 1 : 4;
    const limit = 300;
    const name = `lp-${kind}`;
    const children = await Promise.all(Array.from({ length: WORKERS }, startWorker));
    const files = children.map((_, i) => join(dir, `${kind}-${i}`));
    for (const f of files) writeFileSync(f, '');
    const reports = children.map(
      (child, i) =>
        new Promise<LeaseReport | undefined>((resolve) => {
          child.once('exit', () => resolve(undefined));
          child.once('message', (r) => resolve(r as LeaseReport));
          const job: LeaseJob = {
            port: server.port,
            kind,
            limit,
            windowMs,
            segments,
            name,
            durationMs: 10 * windowMs,
            inflight: 8,
            file: files[i],
            rate: 0,
          };
          child.send(job);
        }),
    );
    try {
      await sleep(2.3 * windowMs);
      children[1].kill('SIGSTOP');
      await sleep(1.2 * windowMs);
      children[2].kill('SIGKILL');
      await sleep(0.8 * windowMs + 20);
      children[1].kill('SIGCONT');
      const done = await Promise.all(reports);
      assert.equal(done[2], undefined, 'the killed worker never reported');
      assert.equal(
        done.reduce((n, r) => n + (r?.errors ?? 0), 0),
        0,
        'no decision fell back to onUnavailable',
      );
    } finally {
      for (const child of children)
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    // Redis's state says where the windows (segments) are: its start is on the grid they are all on.
    const state = (await client.eval(
      "return { cmsgpack.unpack(redis.call('GET', KEYS[1])) }",
      1,
      `floodgate:{${name}}${name}`,
    )) as number[];
    const segmentMs = windowMs / segments;
    const grid = state[0];
    const per = new Map<number, number>();
    let timed = 0;
    let first = Number.POSITIVE_INFINITY;
    let last = Number.NEGATIVE_INFINITY;
    const segmentOf = (t: number) => Math.floor((t - grid) / segmentMs);
    for (const f of files) {
      for (const line of readFileSync(f, 'utf8').split('\n')) {
        if (line === '') continue;
        const [mark, lo, mid] = line.split(',').map(Number);
        const segment = segmentOf(mark);
        assert.ok(Number.isInteger((mark - grid) / segmentMs), `a mark on the grid: ${line}`);
        first = Math.min(first, segment);
        last = Math.max(last, segment);
        per.set(segment, (per.get(segment) ?? 0) + 1);
        if (lo !== undefined && segmentOf(lo) === segmentOf(mid)) {
          timed++;
          assert.equal(
            segmentOf(lo),
            segment,
            `granted at ${lo}–${mid} from a batch of the segment at ${mark}`,
          );
        }
      }
    }
    let worst = 0;
    for (let end = first; end <= last + segments - 1; end++) {
      let sum = 0;
      for (let j = end - segments + 1; j <= end; j++) sum += per.get(j) ?? 0;
      worst = Math.max(worst, sum);
      assert.ok(sum <= limit, `window ending with segment ${end}: ${sum} > ${limit}`);
    }
    const total = [...per.values()].reduce((a, b) => a + b, 0);
    assert.ok(timed > total / 4, `${timed} of ${total} grants were made inside the call`);
    // The hot key was used: the busiest window was (nearly) full.
    assert.ok(worst >= limit * 0.9, `busiest window admitted ${worst} of ${limit}`);
  });
}
