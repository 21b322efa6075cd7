/** An Express app with rate limiting and timeouts, type-checked by `npm run typecheck`. Run: `node --import tsx examples/express.ts`. */
import express from 'express';
import { rateLimiting, requestTimeoutOf, requestTimeouts } from '../src/adapters/express/index.ts';
import { clientIp } from '../src/http/index.ts';
import { fixedWindow, partitioned, slidingWindow } from '../src/index.ts';

const byClient = clientIp({ trustedProxies: ['10.0.0.0/8'] });
const limiter = rateLimiting({
  global: partitioned({ key: byClient, limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
  policies: {
    login: partitioned({
      key: byClient,
      limiter: slidingWindow({ permitLimit: 5, window: '1m', segmentsPerWindow: 6 }),
    }),
  },
});
const timeouts = requestTimeouts({ default: '5s' });

const app = express();
app.use(timeouts);
app.use(limiter);
app.post('/login', limiter.requirePolicy('login'), (_req, res) => {
  res.send('welcome');
});
app.get('/health', limiter.noRateLimit(), (_req, res) => {
  res.send('ok');
});
app.get('/report', timeouts.route('30s'), async (req, res) => {
  res.json(await buildReport({ signal: requestTimeoutOf(req)!.signal }));
});

async function buildReport({ signal }: { signal: AbortSignal }): Promise<{ rows: number }> {
  signal.throwIfAborted();
  return { rows: 0 };
}

const server = app.listen(0, () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}`);
  if (process.env.EXAMPLE_EXIT !== '0') server.close();
});
