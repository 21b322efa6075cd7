/**
 * The login recipe of docs/login.md (bench/login-recipe.ts, which the bench checks against the guide) over real
 * sockets with an injected clock: the real user's three typos do not hold her; attackers failing on purpose from
 * other addresses lock her username out for every address but her usual one, which still gets in; the lockout
 * of the other addresses ends when Retry-After says.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { loginApp } from '../../bench/login-recipe.ts';
import { resetWarnings } from '../../src/http/warnings.ts';

test('the login recipe: typos pass, a username locked by attackers still opens from its usual address', async () => {
  let t = 1_000;
  const app = loginApp({ now: () => t });
  app.set('trust proxy', 'loopback');
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/login`;
  const login = async (ip: string, username: string, password: string) => {
    const res = await fetch(base, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
      body: JSON.stringify({ username, password }),
    });
    await res.text();
    return { status: res.status, retryAfter: res.headers.get('retry-after') };
  };
  try {
    const home = '192.0.2.10';
    assert.equal((await login(home, 'alice', 'right-alice')).status, 200, 'her usual address');
    for (const typo of ['right-alcie', 'rihgt-alice', 'right-Alice']) {
      assert.equal((await login(home, 'alice', typo)).status, 401);
    }
    assert.equal((await login(home, 'alice', 'right-alice')).status, 200, 'three typos do not hold her');

    // Ten failures from other addresses lock the username out for every other address…
    for (let i = 0; i < 10; i++) assert.equal((await login(`198.51.100.${i}`, 'alice', 'x')).status, 401);
    const locked = await login('198.51.100.99', 'alice', 'right-alice');
    assert.deepEqual(locked, { status: 429, retryAfter: '300' }, 'five minutes for a new address');
    // …but not for hers.
    assert.equal((await login(home, 'alice', 'right-alice')).status, 200, 'her usual address still opens');
    t += 300_000;
    assert.equal((await login('198.51.100.99', 'alice', 'right-alice')).status, 200, 'over when it said');
  } finally {
    server.closeAllConnections();
    server.close();
    resetWarnings();
  }
});
