/**
 * node:http: a wrapped handler that throws or rejects on a route that can queue never becomes an unhandled
 * rejection: a child process with Node's default flags survives 1 000 throwing requests, each answered 500, and
 * every error reaches `onError` (or the console, by default).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('./fixtures/throwing-server.ts', import.meta.url));
const PATHS = ['/sync', '/async', '/timed'];

async function start(mode: string): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const line = await Promise.race([
    once(child.stdout!, 'data').then(([chunk]) => chunk as Buffer),
    once(child, 'exit').then(() => {
      throw new Error(`the server did not start: ${stderr}`);
    }),
  ]);
  return { child, url: line.toString().trim(), stderr: () => stderr };
}

function get(agent: http.Agent, url: string): Promise<number> {
  return new Promise((resolve) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', () => resolve(0));
  });
}

for (const mode of ['hook', 'default']) {
  test(`1 000 throwing requests, onError ${mode === 'hook' ? 'given' : 'left to its default'}`, async () => {
    const { child, url, stderr } = await start(mode);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    try {
      const statuses = new Map<number, number>();
      let next = 0;
      const worker = async () => {
        while (next < 1000) {
          const status = await get(agent, `${url}${PATHS[next++ % PATHS.length]}`);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      assert.deepEqual([...statuses], [[500, 1000]], stderr().slice(0, 2000));
      assert.equal(child.exitCode, null, `the server died: ${stderr().slice(0, 2000)}`);
      const count = await fetch(`${url}/count`).then((r) => r.text());
      if (mode === 'hook') assert.equal(count, '1000');
      else assert.equal(stderr().match(/Error: (sync|async|timed) \d+/g)?.length, 1000);
    } finally {
      agent.destroy();
      child.kill();
    }
  });
}
