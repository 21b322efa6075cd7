import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientIp } from '../../src/http/client-ip.ts';
import { headerValue, UNVALIDATED_KEY, validatedKey } from '../../src/http/keys.ts';
import type { HttpRequest } from '../../src/http/request.ts';

function request(
  headers: Record<string, string | string[]> = {},
  remoteAddress = '203.0.113.7',
): HttpRequest {
  return { remoteAddress, method: 'GET', path: '/', header: (name) => headers[name] };
}

const KNOWN = new Set(['key-alice', 'key-bob']);

describe('validatedKey()', () => {
  const key = validatedKey({ from: headerValue('X-Api-Key'), validate: (value) => KNOWN.has(value) });

  test('a validated value becomes the key, prefixed', () => {
    assert.equal(key(request({ 'x-api-key': 'key-alice' })), 'key:key-alice');
    assert.equal(key(request({ 'x-api-key': 'key-bob' })), 'key:key-bob');
  });

  const folded: Array<[name: string, headers: Record<string, string | string[]>]> = [
    ['missing', {}],
    ['empty', { 'x-api-key': '' }],
    ['unknown', { 'x-api-key': 'key-mallory' }],
    ['sent on several lines', { 'x-api-key': ['key-alice', 'key-bob'] }],
    ['a fresh value per request', { 'x-api-key': `key-${Math.random()}` }],
  ];
  for (const [name, headers] of folded) {
    test(`${name} values share one bucket`, () => assert.equal(key(request(headers)), UNVALIDATED_KEY));
  }

  test('overlong values fold without reaching validate', () => {
    const seen: string[] = [];
    const accepting = validatedKey({
      from: headerValue('x-user'),
      validate: (value) => {
        seen.push(value);
        return true;
      },
      maxLength: 8,
    });
    assert.equal(accepting(request({ 'x-user': '12345678' })), 'key:12345678');
    assert.equal(accepting(request({ 'x-user': '123456789' })), UNVALIDATED_KEY);
    assert.equal(accepting(request({ 'x-user': 'x'.repeat(100_000) })), UNVALIDATED_KEY);
    assert.deepEqual(seen, ['12345678']);
  });

  test('the default maxLength is 256', () => {
    const accepting = validatedKey({ from: headerValue('x-user'), validate: () => true });
    assert.equal(accepting(request({ 'x-user': 'a'.repeat(256) })), `key:${'a'.repeat(256)}`);
    assert.equal(accepting(request({ 'x-user': 'a'.repeat(257) })), UNVALIDATED_KEY);
  });

  test('fallback keys what does not validate', () => {
    const withFallback = validatedKey({
      from: headerValue('x-api-key'),
      validate: (value) => KNOWN.has(value),
      fallback: clientIp(),
    });
    assert.equal(withFallback(request({ 'x-api-key': 'key-alice' })), 'key:key-alice');
    assert.equal(withFallback(request({ 'x-api-key': 'key-mallory' })), '203.0.113.7');
    assert.equal(withFallback(request({}, '198.51.100.1')), '198.51.100.1');
  });

  test('a prefix keeps validated values apart from fallback keys', () => {
    const anyValue = validatedKey({
      from: headerValue('x-user'),
      validate: () => true,
      fallback: clientIp(),
    });
    assert.notEqual(anyValue(request({ 'x-user': '203.0.113.7' })), anyValue(request({})));
    const user = validatedKey({ from: headerValue('x-user'), validate: () => true, prefix: 'user:' });
    assert.equal(user(request({ 'x-user': 'floodgate:unvalidated' })), 'user:floodgate:unvalidated');
  });

  const invalid: Array<[name: string, options: unknown, message: RegExp]> = [
    ['no options', undefined, /from must be a function; got undefined/],
    ['from missing', { validate: () => true }, /from must be a function/],
    ['validate missing', { from: () => 'x' }, /validate must be a function; got undefined/],
    [
      'prefix not a string',
      { from: () => 'x', validate: () => true, prefix: 1 },
      /prefix must be a string; got 1/,
    ],
    [
      'fallback not a function',
      { from: () => 'x', validate: () => true, fallback: 'ip' },
      /fallback.*got "ip"/,
    ],
    ['maxLength 0', { from: () => 'x', validate: () => true, maxLength: 0 }, /maxLength.*got 0/],
    [
      'maxLength fractional',
      { from: () => 'x', validate: () => true, maxLength: 2.5 },
      /maxLength.*got 2\.5/,
    ],
  ];
  for (const [name, options, message] of invalid) {
    test(`rejects ${name}`, () => assert.throws(() => validatedKey(options as never), message));
  }

  test('headerValue rejects an empty name', () => {
    assert.throws(() => headerValue(''), TypeError);
  });
});
