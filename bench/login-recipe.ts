// The recipe of docs/login.md, verbatim after the '---' line but for the import paths ('floodgate' there):
// bench/login-attacks.bench.ts refuses to run if the guide says anything else.

// ---
import express from 'express';
import { rateLimiting } from '../src/adapters/express/index.ts';
import { clientIp } from '../src/http/index.ts';
import { type Clock, chain, lockout, partitioned, tokenBucket } from '../src/index.ts';
import { checkPassword } from './login-passwords.ts';

/** The login route's limits; `clock` is for tests (default: the process's monotonic clock). */
export function loginApp(clock?: Clock): express.Express {
  const ip = clientIp();
  const username = (req: express.Request) => String(req.body?.username ?? '').slice(0, 100);
  const pair = (req: express.Request) => `${username(req)}|${ip(req)}`;
  // The (username, address) pairs that logged in before: a user's usual address (your "trusted devices").
  const usual = new Set<string>();

  const limits = rateLimiting({
    // Anonymous traffic keeps a ceiling per address, on every route.
    global: partitioned({
      key: ip,
      limiter: tokenBucket({ tokenLimit: 100, tokensPerPeriod: 100, period: '1m', clock }),
    }),
    policies: {
      login: {
        limiter: chain(
          // Consecutive failures of one user from one address lock that pair out fast, longer each time.
          partitioned({
            key: pair,
            limiter: lockout({
              failures: 5,
              within: '15m',
              lockFor: '1m',
              factor: 2,
              maxLockFor: '1h',
              clock,
            }),
          }),
          // Failures of one user from any other address slow them all down, never for long; the user's usual
          // address is counted apart, so nobody else can lock the user out of it.
          partitioned({
            key: (req: express.Request) => (usual.has(pair(req)) ? pair(req) : username(req)),
            limiter: lockout({
              failures: 10,
              within: '1h',
              lockFor: '5m',
              factor: 2,
              maxLockFor: '1h',
              clock,
            }),
          }),
          // Failures from one address across usernames: password spraying.
          partitioned({
            key: ip,
            limiter: lockout({
              failures: 20,
              within: '1h',
              lockFor: '1h',
              factor: 2,
              maxLockFor: '24h',
              clock,
            }),
          }),
        ),
        // Only failures count: a success clears the counts and the growth.
        skipSuccessfulRequests: true,
      },
    },
  });

  const app = express();
  app.use(express.json());
  app.use(limits);
  app.post('/login', limits.requirePolicy('login'), async (req, res) => {
    if (!(await checkPassword(username(req), String(req.body?.password)))) {
      res.status(401).send('wrong username or password');
      return;
    }
    usual.add(pair(req));
    res.send('welcome');
  });
  return app;
}
