import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { concurrency, fixedWindow } from '../../src/index.ts';
import { adapters } from './apps.ts';

/**
 * No permit leaks: a concurrency policy with a queue, under requests whose handlers throw at random and whose
 * clients go away at random (while queued, while running), must be back to all permits free and nobody queued.
 */
const TOTAL = Number(process.env.LEAK_REQUESTS ?? 10_000);
const PER_ADAPTER = Math.ceil(TOTAL / Object.keys(adapters).length);
const IN_FLIGHT = 24;

function one(base: string, agent: http.Agent, i: number): Promise<string> {
  const roll = (i * 7919) % 100; // deterministic spread of behaviours
  const query = roll < 15 ? '?throw=1' : roll < 40 ? '?delay=2' : '';
  return new Promise((resolve) => {
    const req = http.get(`${base}/work${query}`, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
      res.on('error', () => resolve('reset'));
    });
    req.on('error', () => resolve('aborted'));
    // A leaked permit would leave queued requests hanging: give up on them, and let the check below fail.
    req.setTimeout(2_000, () => req.destroy());
    if (roll >= 85) setTimeout(() => req.destroy(), roll % 4);
  });
}

for (const [name, start] of Object.entries(adapters)) {
  describe(`no leaked permit over ${name}`, () => {
    test(`${PER_ADAPTER} requests with handler throws and client aborts`, async () => {
      const slots = concurrency({ permitLimit: 4, queueLimit: 8 });
      const global = fixedWindow({ permitLimit: 1_000_000, window: '1h' });
      const app = await start({
        options: { global, policies: { slots } },
        routes: [{ path: '/work', limit: 'slots' }],
      });
      const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
      const outcomes = new Map<string, number>();
      try {
        let next = 0;
        const worker = async () => {
          while (next < PER_ADAPTER) {
            const outcome = await one(app.url, agent, next++);
            outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
          }
        };
        await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
        // Give closes that are still in flight a moment to arrive.
        for (let i = 0; i < 100 && slots.statistics().available < 4; i++) {
          await new Promise((r) => setTimeout(r, 20));
        }
        const stats = slots.statistics();
        assert.deepEqual(
          { available: stats.available, queued: stats.queued },
          { available: 4, queued: 0 },
          JSON.stringify([...outcomes]),
        );
        assert.ok(
          (outcomes.get('200') ?? 0) > 0 && (outcomes.get('500') ?? 0) > 0,
          JSON.stringify([...outcomes]),
        );
      } finally {
        agent.destroy();
        await app.close();
      }
    });
  });
}
