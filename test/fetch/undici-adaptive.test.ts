import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { Agent, type Dispatcher, request } from 'undici';
import { type ClientOptions, rateLimitInterceptor, ThrottledError } from '../../src/fetch/index.ts';
import { tokenBucket } from '../../src/index.ts';
import { handClock, type Respond, startServer, type TestServer } from './server.ts';

let a: TestServer;
const agents: Agent[] = [];
before(async () => {
  a = await startServer();
});
after(async () => {
  await Promise.all(agents.map((agent) => agent.close()));
  await a.close();
});

function dispatcher(options: Partial<ClientOptions>) {
  const agent = new Agent();
  agents.push(agent);
  const interceptor = rateLimitInterceptor({
    limiter: tokenBucket({ tokenLimit: 1e6, tokensPerPeriod: 1e6, period: '1s' }),
    clock: handClock(),
    random: () => 0,
    ...options,
  });
  return { agent: agent.compose(interceptor) as Dispatcher, interceptor };
}

const down: Respond = (_req, res) => res.writeHead(500).end('down');
function failFirst(n: number, fail: Respond = down): Respond {
  let seen = 0;
  return (req, res, hit) => (seen++ < n ? fail(req, res, hit) : res.end('ok'));
}

async function get(agent: Dispatcher, opts: Partial<Dispatcher.RequestOptions> = {}) {
  const { statusCode, headers, body } = await request(a.url(), { dispatcher: agent, ...opts });
  return { statusCode, headers, text: await body.text() };
}

test('undici: 5xx and a reset socket are retried, the dropped answers unseen by the caller', async () => {
  const { agent, interceptor } = dispatcher({ retry: 3 });
  a.respond = failFirst(2);
  let start = a.hits.length;
  assert.deepEqual((await get(agent)).text, 'ok');
  assert.equal(a.hits.length - start, 3);
  a.respond = failFirst(1, (_req, res) => res.socket?.destroy());
  start = a.hits.length;
  assert.equal((await get(agent)).statusCode, 200);
  assert.equal(a.hits.length - start, 2);
  assert.equal(interceptor.statistics.retries, 3);
});

test('undici: POST is not retried; the retry budget caps retries', async () => {
  a.respond = down;
  const { agent, interceptor } = dispatcher({ retry: { attempts: 3, budget: 0.2, minRetries: 0 } });
  let start = a.hits.length;
  assert.equal((await get(agent, { method: 'POST', body: 'x' })).statusCode, 500);
  assert.equal(a.hits.length - start, 1);
  start = a.hits.length;
  // The POST counted as a call: 11 calls, retries while retries + 1 ≤ 0.2 × calls.
  for (let i = 0; i < 10; i++) assert.equal((await get(agent)).statusCode, 500);
  assert.equal(a.hits.length - start, 12);
  assert.equal(interceptor.statistics.retries, 2);
  assert.equal(interceptor.statistics.budgetExhausted, 10, 'each GET that failed wanted one more retry');
});

test("undici: throttled calls fail fast ('throw') or get a local 503 ('respond'), reaching nothing", async () => {
  a.respond = down;
  const thrower = dispatcher({ adaptive: { minRequests: 0 }, onLimited: 'throw' });
  assert.equal((await get(thrower.agent)).statusCode, 500);
  const start = a.hits.length;
  await assert.rejects(get(thrower.agent), ThrottledError);
  assert.equal(thrower.interceptor.statistics.throttled, 1);
  assert.equal(thrower.interceptor.rejectionProbability(a.origin), 2 / 3);
  const responder = dispatcher({ adaptive: { minRequests: 0 }, onLimited: 'respond' });
  await get(responder.agent);
  const local = await get(responder.agent);
  assert.equal(local.statusCode, 503);
  assert.equal(local.headers['floodgate-local'], 'throttled');
  assert.equal(a.hits.length - start, 1);
});

test('undici: an abort during the backoff ends the wait', { timeout: 20_000 }, async () => {
  a.respond = down;
  const { agent, interceptor } = dispatcher({
    random: () => 0.5,
    retry: { attempts: 2, backoff: { baseMs: 600_000, maxMs: 600_000 } },
  });
  const controller = new AbortController();
  const start = a.hits.length;
  const pending = get(agent, { signal: controller.signal });
  while (interceptor.statistics.retries === 0) await tick();
  controller.abort(new Error('gave up'));
  await assert.rejects(pending, /gave up/);
  assert.equal(a.hits.length - start, 1);
});
