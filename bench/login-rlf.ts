/**
 * rate-limiter-flexible's published login recipe ("Login endpoint protection" in its wiki), on the same Express
 * server shape as floodgate's: wrong attempts per address per day (100, then blocked a day) and consecutive
 * failures per (username, address) (10, then blocked an hour); a request of a blocked source is answered 429 with
 * Retry-After before the password is checked; a success deletes the (username, address) count. Memory storage.
 * Written from the recipe's description for this bench, not copied.
 *
 * One change: the recipe keeps the (username, address) count 90 days; `RateLimiterMemory` sets a timer for the
 * whole duration, and Node cannot hold one past 2^31 ms (24.8 days): it fires at once (TimeoutOverflowWarning)
 * and the count is gone before the next attempt. 24 days here, the same within the hour measured.
 */
import express from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { checkPassword } from './login-passwords.ts';

const PER_IP_PER_DAY = 100;
const CONSECUTIVE_PER_USER_AND_IP = 10;

export function rlfLoginApp(): express.Express {
  const byIp = new RateLimiterMemory({
    keyPrefix: 'login_fail_ip_per_day',
    points: PER_IP_PER_DAY,
    duration: 60 * 60 * 24,
    blockDuration: 60 * 60 * 24,
  });
  const byUserAndIp = new RateLimiterMemory({
    keyPrefix: 'login_fail_consecutive_username_and_ip',
    points: CONSECUTIVE_PER_USER_AND_IP,
    duration: 60 * 60 * 24 * 24, // the recipe's 90 days overflows Node's timers (see above)
    blockDuration: 60 * 60,
  });
  const refuse = (res: express.Response, msBeforeNext: number) => {
    res.set('Retry-After', String(Math.round(msBeforeNext / 1000) || 1));
    res.status(429).send('Too Many Requests');
  };

  const app = express();
  app.use(express.json());
  app.post('/login', async (req, res) => {
    const ip = req.ip ?? '';
    const username = String(req.body?.username ?? '');
    const pairKey = `${username}_${ip}`;
    const [pair, perIp] = await Promise.all([byUserAndIp.get(pairKey), byIp.get(ip)]);
    if (perIp !== null && perIp.consumedPoints > PER_IP_PER_DAY) return refuse(res, perIp.msBeforeNext);
    if (pair !== null && pair.consumedPoints > CONSECUTIVE_PER_USER_AND_IP)
      return refuse(res, pair.msBeforeNext);
    if (await checkPassword(username, String(req.body?.password))) {
      if (pair !== null && pair.consumedPoints > 0) await byUserAndIp.delete(pairKey);
      res.send('welcome');
      return;
    }
    try {
      await Promise.all([byIp.consume(ip), byUserAndIp.consume(pairKey)]);
      res.status(401).send('wrong username or password');
    } catch (rejected) {
      if (!(rejected instanceof RateLimiterRes)) throw rejected;
      refuse(res, rejected.msBeforeNext);
    }
  });
  return app;
}
