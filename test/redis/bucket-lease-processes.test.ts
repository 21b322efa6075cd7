/**
 * A leased token bucket across real processes (issue 26): four Node processes decide on one hot bucket of a real
 * redis-server: a steady demand under the refill rate, which keeps the bucket full and their batches alive, then
 * all at once as fast as they can, three times; one is SIGSTOPped for longer than a batch lives and one SIGKILLed. Every grant's wall-clock time
 * is written down as it happens, as the wall-clock readings before the call and after its answer, between which
 * it was made. Measured: the worst, over every span [s, e] of real time, of the grants certainly made in it
 * (both readings inside) less what the bucket allows (tokenLimit + the refill over e − s). The bound: the reserve
 * (1 % of tokenLimit), plus one token per process for the request whose take was in flight at s (Redis counted
 * it before s, as a strict decision is counted when Redis decides it).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { worstOvershoot } from '../support/overshoot.ts';
import { RedisServer } from '../support/redis-server.ts';
import type { BucketLeaseJob, BucketLeaseReport } from './fixtures/bucket-lease-worker.ts';

const WORKER = fileURLToPath(new URL('./fixtures/bucket-lease-worker.ts', import.meta.url));
const WORKERS = 4;
let server: RedisServer;
let dir: string;
before(async () => {
  server = await RedisServer.start();
  dir = mkdtempSync(join(tmpdir(), 'floodgate-bucket-leases-'));
});
after(async () => {
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

test(`token bucket: ${WORKERS} processes on one leased bucket, one SIGSTOPped past its batch's life and one SIGKILLed, admit over any span at most what the bucket allows + the reserve`, async () => {
  const tokenLimit = 300;
  const perMs = 1; // 100 tokens per 100 ms, continuous
  const reserve = Math.floor(tokenLimit / 100);
  const name = 'bucket-lp';
  const children = await Promise.all(Array.from({ length: WORKERS }, startWorker));
  const files = children.map((_, i) => join(dir, `bucket-${i}`));
  for (const f of files) writeFileSync(f, '');
  const startAt = Date.now() + 200;
  const reports = children.map(
    (child, i) =>
      new Promise<BucketLeaseReport | undefined>((resolve) => {
        child.once('exit', () => resolve(undefined));
        child.once('message', (r) => resolve(r as BucketLeaseReport));
        const job: BucketLeaseJob = {
          port: server.port,
          name,
          tokenLimit,
          tokensPerPeriod: 100,
          periodMs: 100,
          durationMs: 3 * 1200,
          inflight: 8,
          hotMs: 150,
          coolMs: 1000,
          coolEveryMs: 53,
          startAt,
          file: files[i],
        };
        child.send(job);
      }),
  );
  try {
    // Stopped in the second cycle's steady phase, woken in the third's: past its batch's life (1 s).
    await sleep(200 + 1500);
    children[1].kill('SIGSTOP');
    await sleep(600);
    children[2].kill('SIGKILL');
    await sleep(700);
    children[1].kill('SIGCONT');
    const done = await Promise.all(reports);
    assert.equal(done[2], undefined, 'the killed worker never reported');
    for (const i of [0, 1, 3]) assert.ok(done[i] !== undefined, `worker ${i} reported`);
    assert.equal(
      done.reduce((n, r) => n + (r?.errors ?? 0), 0),
      0,
      'no decision fell back to onUnavailable',
    );
  } finally {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  const grants: [number, number][] = [];
  for (const f of files) {
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      if (line === '') continue;
      const [lo, hi] = line.split(',').map(Number);
      grants.push([lo, hi]);
    }
  }
  const worst = worstOvershoot(grants, tokenLimit, perMs);
  const bound = reserve + WORKERS;
  console.log(
    `token bucket leases: ${grants.length} grants, worst overshoot ${worst.toFixed(1)} tokens over a span (reserve ${reserve}, asserted ≤ ${bound})`,
  );
  assert.ok(worst <= bound, `worst overshoot ${worst} > ${bound}`);
  // The bucket was used: its first hot phase took (nearly) all of it.
  assert.ok(grants.length >= tokenLimit, `${grants.length} grants`);
});
