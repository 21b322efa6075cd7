import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import fastifyRateLimit from '@fastify/rate-limit';
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import Fastify from 'fastify';
import { rateLimiting } from '../../src/adapters/node/rate-limiting.ts';
import type { BurstOptions } from '../../src/cli/args.ts';
import { runBurst } from '../../src/cli/burst.ts';
import { fixedWindow } from '../../src/index.ts';

const servers: http.Server[] = [];
after(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function listen(server: http.Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** A writable that keeps what it was given. */
function sink(isTTY = false) {
  return {
    text: '',
    isTTY,
    write(chunk: string) {
      this.text += chunk;
      return true;
    },
  };
}

const burst = (url: string, more: Partial<BurstOptions> = {}): BurstOptions => ({
  url,
  requests: 12,
  concurrency: 3,
  method: 'GET',
  headers: [],
  timeoutMs: 5_000,
  ...more,
});

describe('floodgate burst against real servers', () => {
  test('a floodgate server: the statuses, the first 429 and how remaining counted down; exit 0', async () => {
    const seen: Array<{ method?: string; body: string; header?: string | string[] }> = [];
    const limit = rateLimiting({ global: fixedWindow({ permitLimit: 5, window: '1h' }) });
    const url = await listen(
      http.createServer(
        limit((req, res) => {
          let body = '';
          req.on('data', (chunk) => {
            body += chunk;
          });
          req.on('end', () => {
            seen.push({ method: req.method, body, header: req.headers['x-tenant'] });
            res.end('ok');
          });
        }),
      ),
    );
    const out = sink();
    const err = sink();
    const { code, outcomes } = await runBurst(
      burst(url, { concurrency: 1, method: 'PUT', body: '{"a":1}', headers: [['X-Tenant', 'acme']] }),
      { out, err, env: {} },
    );
    assert.equal(code, 0);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      [200, 200, 200, 200, 200, 429, 429, 429, 429, 429, 429, 429],
    );
    assert.deepEqual(seen[0], { method: 'PUT', body: '{"a":1}', header: 'acme' });
    assert.match(out.text, /\.\.\.\.\.xxxxx xx/);
    assert.match(out.text, /\^ first 429: request #6/);
    assert.match(out.text, /policy "global", limit 5/);
    assert.match(out.text, /remaining: 4 3 2 1 0×8/);
    assert.match(out.text, /Retry-After on 7 answers/);
    assert.equal(err.text, '', 'no progress when stderr is not a terminal');
    assert.ok(!out.text.includes('\x1b['), 'no colour when stdout is not a terminal');
  });

  test('live progress goes to stderr when it is a terminal', async () => {
    const url = await listen(http.createServer((_req, res) => res.end('ok')));
    const err = sink(true);
    await runBurst(burst(url, { requests: 3 }), { out: sink(), err, env: {} });
    assert.match(err.text, /[1-3]\/3 done {2}200 ×[1-3]/);
    assert.ok(err.text.endsWith('\r\x1b[2K'), 'the progress line is cleared before the report');
  });

  test('NO_COLOR keeps a terminal colourless', async () => {
    const url = await listen(http.createServer((_req, res) => res.end('ok')));
    const out = { ...sink(true), columns: 80 };
    await runBurst(burst(url, { requests: 2 }), { out, err: sink(), env: { NO_COLOR: '' } });
    assert.ok(!out.text.includes('\x1b['));
    const coloured = { ...sink(true), columns: 80 };
    await runBurst(burst(url, { requests: 2 }), { out: coloured, err: sink(), env: {} });
    assert.ok(coloured.text.includes('\x1b[32m.\x1b[39m'));
  });

  test('a port that refuses connections: every request ECONNREFUSED, exit 1', async () => {
    const server = http.createServer();
    const url = await listen(server);
    await new Promise((resolve) => server.close(resolve));
    const out = sink();
    const { code, outcomes } = await runBurst(burst(url), { out, err: sink(), env: {} });
    assert.equal(code, 1);
    assert.deepEqual(new Set(outcomes.map((o) => o.error)), new Set(['ECONNREFUSED']));
    assert.equal(outcomes.length, 12);
    assert.match(out.text, /12 × ECONNREFUSED/);
    assert.match(out.text, /no request got an HTTP answer/);
  });

  test('a server that never answers: each request ends at its timeout, exit 1', async () => {
    const url = await listen(http.createServer(() => {}));
    const out = sink();
    const { code, outcomes } = await runBurst(burst(url, { requests: 4, concurrency: 2, timeoutMs: 50 }), {
      out,
      err: sink(),
      env: {},
    });
    assert.equal(code, 1);
    assert.deepEqual(
      outcomes.map((o) => o.error),
      ['timeout', 'timeout', 'timeout', 'timeout'],
    );
    assert.match(out.text, /TTTT/);
  });

  test('stopped early (Ctrl-C): nothing more is sent, the request in flight is dropped, the report follows', async () => {
    const stop = new AbortController();
    let n = 0;
    const url = await listen(
      http.createServer((_req, res) => {
        if (++n === 3) stop.abort();
        else res.end('ok');
      }),
    );
    const out = sink();
    const { code, outcomes } = await runBurst(burst(url, { requests: 10, concurrency: 1 }), {
      out,
      err: sink(),
      env: {},
      signal: stop.signal,
    });
    assert.equal(code, 0);
    assert.deepEqual(
      outcomes.map((o) => o.status ?? o.error),
      [200, 200, 'interrupted'],
    );
    assert.equal(n, 3);
    assert.match(out.text, /interrupted: 3 of 10 sent/);
    assert.match(out.text, / {2}1 {2}\.\.~/);
  });

  test('-c above 10 with a stop signal: no MaxListenersExceededWarning (one listener for the burst)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const url = await listen(http.createServer((_req, res) => void setTimeout(() => res.end('ok'), 20)));
      const stop = new AbortController();
      const { outcomes } = await runBurst(burst(url, { requests: 40, concurrency: 20 }), {
        out: sink(),
        err: sink(),
        env: {},
        signal: stop.signal,
      });
      await new Promise((r) => setImmediate(r));
      assert.equal(outcomes.filter((o) => o.status === 200).length, 40);
      assert.deepEqual(warnings, []);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('-n below -c: the report says how many really ran at a time', async () => {
    const url = await listen(http.createServer((_req, res) => void res.end('ok')));
    const out = sink();
    await runBurst(burst(url, { requests: 3, concurrency: 10 }), { out, err: sink(), env: {} });
    assert.match(out.text, /3 × GET \S+, 3 at a time/);
  });

  test('some answers among failures: exit 0', async () => {
    let n = 0;
    const url = await listen(
      http.createServer((req, res) => {
        if (n++ % 2 === 0) res.end('ok');
        else req.socket.destroy();
      }),
    );
    const { code, outcomes } = await runBurst(burst(url, { requests: 4, concurrency: 1 }), {
      out: sink(),
      err: sink(),
      env: {},
    });
    assert.equal(code, 0);
    assert.deepEqual(
      outcomes.map((o) => o.status ?? o.error),
      [200, 'ECONNRESET', 200, 'ECONNRESET'],
    );
  });
});

describe('floodgate burst reads the fields of the usual limiters', () => {
  for (const standardHeaders of ['draft-6', 'draft-7', 'draft-8'] as const) {
    test(`express-rate-limit, standardHeaders: '${standardHeaders}', legacy headers too`, async () => {
      const app = express();
      app.use(rateLimit({ windowMs: 60_000, limit: 3, standardHeaders, legacyHeaders: true }));
      app.get('/', (_req, res) => {
        res.send('ok');
      });
      const url = await listen(http.createServer(app));
      const out = sink();
      const { outcomes } = await runBurst(burst(url, { requests: 5, concurrency: 1 }), {
        out,
        err: sink(),
        env: {},
      });
      assert.deepEqual(
        outcomes.map((o) => o.status),
        [200, 200, 200, 429, 429],
      );
      const dialect = standardHeaders === 'draft-8' ? 'draft-10' : standardHeaders;
      const quotas = outcomes[0].reading.quotas;
      assert.deepEqual(
        quotas.map((q) => [q.dialect, q.limit, q.remaining]),
        [
          [dialect, 3, 2],
          ['x-ratelimit', 3, 2],
        ],
      );
      // X-RateLimit-Reset is a Unix time in seconds, measured from the response's Date (whole seconds too).
      assert.ok(quotas.every((q) => q.resetMs !== undefined && q.resetMs > 0 && q.resetMs <= 61_000));
      assert.match(out.text, /remaining: 2 1 0×3/);
      assert.equal(outcomes[4].reading.retryAfterMs !== undefined, true);
    });
  }

  for (const enableDraftSpec of [false, true]) {
    test(`@fastify/rate-limit, enableDraftSpec: ${enableDraftSpec}`, async () => {
      const app = Fastify();
      await app.register(fastifyRateLimit, { max: 2, timeWindow: 60_000, enableDraftSpec });
      app.get('/', async () => 'ok');
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const { outcomes } = await runBurst(burst(`${url}/`, { requests: 3, concurrency: 1 }), {
          out: sink(),
          err: sink(),
          env: {},
        });
        assert.deepEqual(
          outcomes.map((o) => o.status),
          [200, 200, 429],
        );
        const [quota] = outcomes[0].reading.quotas;
        assert.equal(quota.dialect, enableDraftSpec ? 'draft-6' : 'x-ratelimit');
        assert.deepEqual([quota.limit, quota.remaining], [2, 1]);
        // Its reset is in seconds from now, in both dialects.
        assert.ok(quota.resetMs !== undefined && quota.resetMs > 0 && quota.resetMs <= 60_000);
        assert.ok(outcomes[2].reading.retryAfterMs !== undefined);
      } finally {
        await app.close();
      }
    });
  }
});
