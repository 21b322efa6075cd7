import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { clientIp, UNKNOWN_CLIENT } from '../../src/http/client-ip.ts';
import { formatIPv6, parseIPv4 } from '../../src/http/ip-address.ts';
import type { HttpRequest } from '../../src/http/request.ts';

function request(
  remoteAddress: string | undefined,
  headers: Record<string, string | string[]> = {},
): HttpRequest {
  return { remoteAddress, method: 'GET', path: '/', header: (name) => headers[name] };
}

const PROXY = '10.0.0.1';
const CLIENT = '203.0.113.7';

describe('clientIp() by default', () => {
  const key = clientIp();

  const cases: Array<[name: string, peer: string | undefined, expected: string]> = [
    ['IPv4 peer', CLIENT, CLIENT],
    ['IPv4-mapped IPv6 peer', `::ffff:${CLIENT}`, CLIENT],
    ['IPv4-mapped IPv6 peer in hex', '::ffff:cb00:7107', CLIENT],
    ['IPv6 peer, grouped by /64', '2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['IPv6 peer in upper case and long form', '2001:0DB8:0001:0002:0000:0000:0000:0001', '2001:db8:1:2::/64'],
    ['IPv6 peer with a zone id', 'fe80::1%eth0', 'fe80::/64'],
    ['IPv6 loopback', '::1', '::/64'],
    ['missing peer (socket closed)', undefined, UNKNOWN_CLIENT],
    ['empty peer', '', UNKNOWN_CLIENT],
    ['unparseable peer', 'not-an-address', UNKNOWN_CLIENT],
  ];
  for (const [name, peer, expected] of cases) {
    test(name, () => assert.equal(key(request(peer)), expected));
  }

  test('ignores forwarded headers, whatever they say', () => {
    const spoofed = { 'x-forwarded-for': '198.51.100.1', forwarded: 'for=198.51.100.2' };
    assert.equal(key(request(CLIENT, spoofed)), CLIENT);
    assert.equal(key(request('127.0.0.1', spoofed)), '127.0.0.1');
  });
});

describe('clientIp() with trusted proxies', () => {
  const key = clientIp({
    trustedProxies: ['10.0.0.0/8', '192.168.1.1', '2001:db8:ffff::/48', '::ffff:172.16.0.0/108'],
  });

  const cases: Array<
    [name: string, peer: string, headers: Record<string, string | string[]>, expected: string]
  > = [
    ['no forwarded header', PROXY, {}, PROXY],
    ['one hop', PROXY, { 'x-forwarded-for': CLIENT }, CLIENT],
    [
      'client-sent entries on the left are skipped',
      PROXY,
      { 'x-forwarded-for': `6.6.6.6, 7.7.7.7, ${CLIENT}` },
      CLIENT,
    ],
    [
      'trusted hops on the right are walked',
      PROXY,
      { 'x-forwarded-for': `6.6.6.6, ${CLIENT}, 10.1.1.1, 192.168.1.1` },
      CLIENT,
    ],
    ['IPv4 with a port', PROXY, { 'x-forwarded-for': `${CLIENT}:5678` }, CLIENT],
    ['bracketed IPv6 with a port', PROXY, { 'x-forwarded-for': '[2001:db8:1:2::9]:80' }, '2001:db8:1:2::/64'],
    ['bare IPv6', PROXY, { 'x-forwarded-for': '2001:db8:1:2::9' }, '2001:db8:1:2::/64'],
    ['IPv6 with a zone id', PROXY, { 'x-forwarded-for': 'fe80::1%25eth0' }, 'fe80::/64'],
    ['IPv4-mapped entry', PROXY, { 'x-forwarded-for': `::ffff:${CLIENT}` }, CLIENT],
    ['extra spaces and tabs', PROXY, { 'x-forwarded-for': ` 6.6.6.6 ,\t${CLIENT}\t` }, CLIENT],
    [
      'multiple header lines, in order',
      PROXY,
      { 'x-forwarded-for': ['6.6.6.6', `${CLIENT}, 10.2.2.2`] },
      CLIENT,
    ],
    [
      'the last header line is read first',
      PROXY,
      { 'x-forwarded-for': [CLIENT, '198.51.100.1'] },
      '198.51.100.1',
    ],
    ['mapped IPv6 proxy peer is trusted', '::ffff:10.0.0.1', { 'x-forwarded-for': CLIENT }, CLIENT],
    ['IPv6 proxy peer', '2001:db8:ffff::1', { 'x-forwarded-for': CLIENT }, CLIENT],
    ['IPv4-mapped trusted range', '172.16.0.9', { 'x-forwarded-for': CLIENT }, CLIENT],
    ['every entry trusted: the leftmost', PROXY, { 'x-forwarded-for': '10.0.0.3, 10.0.0.2' }, '10.0.0.3'],
    ['Forwarded, token', PROXY, { forwarded: `for=${CLIENT}` }, CLIENT],
    ['Forwarded, other parameters', PROXY, { forwarded: `proto=https;For=${CLIENT};by=10.0.0.1` }, CLIENT],
    ['Forwarded, quoted IPv6 with port', PROXY, { forwarded: 'for="[2001:db8::1]:4711"' }, '2001:db8::/64'],
    ['Forwarded, quoted IPv4 with port', PROXY, { forwarded: `for="${CLIENT}:47011"` }, CLIENT],
    ['Forwarded, obfuscated port', PROXY, { forwarded: `for="${CLIENT}:_abc"` }, CLIENT],
    ['Forwarded, client elements on the left', PROXY, { forwarded: `for=6.6.6.6, for=${CLIENT}` }, CLIENT],
    [
      'Forwarded and X-Forwarded-For agree',
      PROXY,
      { forwarded: `for=${CLIENT}`, 'x-forwarded-for': CLIENT },
      CLIENT,
    ],
  ];
  for (const [name, peer, headers, expected] of cases) {
    test(name, () => assert.equal(key(request(peer, headers)), expected));
  }

  // Whatever cannot be read keys the request by its socket peer: never by a value a client chose.
  const garbage: Array<[name: string, headers: Record<string, string | string[]>]> = [
    ['short IPv4 form', { 'x-forwarded-for': '127.1' }],
    ['hex IPv4', { 'x-forwarded-for': '0x7f.0.0.1' }],
    ['octal IPv4', { 'x-forwarded-for': '0177.0.0.1' }],
    ['leading zero', { 'x-forwarded-for': '203.0.113.07' }],
    ['single number', { 'x-forwarded-for': '3405803783' }],
    ['octet out of range', { 'x-forwarded-for': '256.0.0.1' }],
    ['hex in a mapped IPv6', { 'x-forwarded-for': '::ffff:0x7f.0.0.1' }],
    ['octal in a mapped IPv6', { 'x-forwarded-for': '::ffff:0177.0.0.1' }],
    ['short IPv4 in an IPv6', { 'x-forwarded-for': '64:ff9b::127.1' }],
    ['unknown', { 'x-forwarded-for': 'unknown' }],
    ['hostname', { 'x-forwarded-for': 'example.com' }],
    ['empty header', { 'x-forwarded-for': '' }],
    ['empty entry', { 'x-forwarded-for': `${CLIENT}, ` }],
    ['empty entry between', { 'x-forwarded-for': `${CLIENT},,10.0.0.2` }],
    ['bracketed IPv4', { 'x-forwarded-for': `[${CLIENT}]:80` }],
    ['unbracketed IPv6 with a port', { 'x-forwarded-for': '2001:db8::1]:80' }],
    ['bad port', { 'x-forwarded-for': `${CLIENT}:http` }],
    ['IPv4 with a zone id', { 'x-forwarded-for': `${CLIENT}%eth0` }],
    ['two IPv6 compressions', { 'x-forwarded-for': '1::2::3' }],
    ['Forwarded for=unknown', { forwarded: 'for=unknown' }],
    ['Forwarded obfuscated identifier', { forwarded: 'for=_hidden' }],
    ['Forwarded without for', { forwarded: 'proto=https;by=10.0.0.1' }],
    ['Forwarded with two for', { forwarded: `for=${CLIENT};for=6.6.6.6` }],
    ['Forwarded unterminated quote', { forwarded: `for="${CLIENT}` }],
    ['Forwarded escaped quote', { forwarded: 'for="203.0.113.7\\""' }],
    ['Forwarded with spaces around =', { forwarded: `for = ${CLIENT}` }],
    ['headers disagree', { forwarded: 'for=198.51.100.1', 'x-forwarded-for': CLIENT }],
    [
      'more than 32 trusted entries',
      { 'x-forwarded-for': `${CLIENT}, ${Array(40).fill('10.0.0.2').join(', ')}` },
    ],
    ['an entry longer than we read', { 'x-forwarded-for': `${CLIENT}, 10.0.0.2${' '.repeat(600)}` }],
  ];
  for (const [name, headers] of garbage) {
    test(`garbage falls back to the socket peer: ${name}`, () =>
      assert.equal(key(request(PROXY, headers)), PROXY));
  }

  test('an untrusted peer is its own key, whatever it forwards', () => {
    const spoofed = { 'x-forwarded-for': '10.0.0.2, 198.51.100.1', forwarded: 'for=198.51.100.1' };
    assert.equal(key(request(CLIENT, spoofed)), CLIENT);
    assert.equal(key(request('2001:db8:1:2::1', spoofed)), '2001:db8:1:2::/64');
    assert.equal(key(request(undefined, spoofed)), UNKNOWN_CLIENT);
  });

  test('reads a bounded tail of enormous headers', () => {
    const huge = `${'9'.repeat(1_000_000)}, ${CLIENT}`;
    assert.equal(key(request(PROXY, { 'x-forwarded-for': huge })), CLIENT);
    const lines = [...Array(10_000).fill('6.6.6.6'), CLIENT];
    assert.equal(key(request(PROXY, { 'x-forwarded-for': lines })), CLIENT);
    assert.equal(key(request(PROXY, { 'x-forwarded-for': ','.repeat(1_000_000) })), PROXY);
  });
});

describe('clientIp() with a hop count', () => {
  const key = clientIp({ trustedHops: 2 });

  const cases: Array<
    [name: string, peer: string | undefined, headers: Record<string, string>, expected: string]
  > = [
    ['no header: the peer', PROXY, {}, PROXY],
    [
      'the entry two hops from the right',
      PROXY,
      { 'x-forwarded-for': `6.6.6.6, ${CLIENT}, 10.9.9.9` },
      CLIENT,
    ],
    ['hop count larger than the list: the leftmost', PROXY, { 'x-forwarded-for': CLIENT }, CLIENT],
    ['the chosen entry is garbage: the peer', PROXY, { 'x-forwarded-for': 'unknown, 10.9.9.9' }, PROXY],
    ['intermediate entries are not inspected', PROXY, { 'x-forwarded-for': `${CLIENT}, 0x7f.1` }, CLIENT],
    ['Forwarded', PROXY, { forwarded: `for=6.6.6.6, for="[2001:db8::1]", for=10.9.9.9` }, '2001:db8::/64'],
    ['missing peer, header present', undefined, { 'x-forwarded-for': `${CLIENT}, 10.9.9.9` }, CLIENT],
    ['missing peer, garbage', undefined, { 'x-forwarded-for': 'unknown, 10.9.9.9' }, UNKNOWN_CLIENT],
  ];
  for (const [name, peer, headers, expected] of cases) {
    test(name, () => assert.equal(key(request(peer, headers)), expected));
  }

  test('trustedHops: 0 reads no header', () => {
    assert.equal(clientIp({ trustedHops: 0 })(request(PROXY, { 'x-forwarded-for': CLIENT })), PROXY);
  });
});

describe('clientIp() options', () => {
  test('ipv6Subnet groups IPv6 clients by another prefix', () => {
    assert.equal(clientIp({ ipv6Subnet: 48 })(request('2001:db8:1:2::1')), '2001:db8:1::/48');
    assert.equal(clientIp({ ipv6Subnet: 56 })(request('2001:db8:1:2ff::1')), '2001:db8:1:200::/56');
    assert.equal(clientIp({ ipv6Subnet: 128 })(request('2001:db8:1:2::1')), '2001:db8:1:2::1');
    assert.equal(clientIp({ ipv6Subnet: 1 })(request('ffff::1')), '8000::/1');
    // IPv4 clients are not grouped.
    assert.equal(clientIp({ ipv6Subnet: 48 })(request(CLIENT)), CLIENT);
  });

  test('two addresses in one /64 share a key; neighbouring /64s do not', () => {
    const key = clientIp();
    assert.equal(key(request('2001:db8:1:2::1')), key(request('2001:db8:1:2:ffff:ffff:ffff:ffff')));
    assert.notEqual(key(request('2001:db8:1:2::1')), key(request('2001:db8:1:3::1')));
  });

  test('headers limits which forwarded header is read', () => {
    const xffOnly = clientIp({ trustedProxies: ['10.0.0.0/8'], headers: ['x-forwarded-for'] });
    const both = { forwarded: 'for=198.51.100.1', 'x-forwarded-for': CLIENT };
    assert.equal(xffOnly(request(PROXY, both)), CLIENT);
    assert.equal(xffOnly(request(PROXY, { forwarded: 'for=198.51.100.1' })), PROXY);
    const forwardedOnly = clientIp({ trustedProxies: ['10.0.0.0/8'], headers: ['forwarded'] });
    assert.equal(forwardedOnly(request(PROXY, both)), '198.51.100.1');
  });

  test('CIDRs with host bits set are masked to their network', () => {
    const key = clientIp({ trustedProxies: ['10.1.2.3/16'] });
    assert.equal(key(request('10.1.200.1', { 'x-forwarded-for': CLIENT })), CLIENT);
    assert.equal(key(request('10.2.0.1', { 'x-forwarded-for': CLIENT })), '10.2.0.1');
  });

  const invalid: Array<[name: string, options: unknown, error: typeof TypeError, message: RegExp]> = [
    [
      'an obfuscated proxy',
      { trustedProxies: ['10.0.0.0/8', '0x7f.1'] },
      TypeError,
      /trustedProxies\[1\].*"0x7f\.1"/,
    ],
    ['a short proxy form', { trustedProxies: ['127.1'] }, TypeError, /trustedProxies\[0\].*"127\.1"/],
    ['an IPv4 prefix too long', { trustedProxies: ['10.0.0.0/33'] }, TypeError, /"10\.0\.0\.0\/33"/],
    ['an IPv6 prefix too long', { trustedProxies: ['::1/129'] }, TypeError, /"::1\/129"/],
    ['a non-numeric prefix', { trustedProxies: ['10.0.0.0/8x'] }, TypeError, /"10\.0\.0\.0\/8x"/],
    ['a hostname', { trustedProxies: ['proxy.internal'] }, TypeError, /"proxy\.internal"/],
    ['a non-string proxy', { trustedProxies: [10] }, TypeError, /trustedProxies\[0\].*got 10/],
    ['proxies not an array', { trustedProxies: '10.0.0.0/8' }, TypeError, /trustedProxies must be an array/],
    ['both trust options', { trustedProxies: [], trustedHops: 1 }, TypeError, /not both/],
    ['fractional hops', { trustedHops: 1.5 }, RangeError, /trustedHops.*1\.5/],
    ['negative hops', { trustedHops: -1 }, RangeError, /trustedHops.*-1/],
    ['ipv6Subnet 0', { ipv6Subnet: 0 }, RangeError, /ipv6Subnet.*got 0/],
    ['ipv6Subnet 129', { ipv6Subnet: 129 }, RangeError, /ipv6Subnet.*got 129/],
    ['ipv6Subnet as text', { ipv6Subnet: '64' }, RangeError, /ipv6Subnet.*got "64"/],
    [
      'headers without trust',
      { headers: ['forwarded'] },
      TypeError,
      /headers.*trustedProxies or trustedHops/,
    ],
    ['an unknown header', { trustedHops: 1, headers: ['x-real-ip'] }, TypeError, /headers.*"x-real-ip"/],
    ['no header', { trustedHops: 1, headers: [] }, TypeError, /headers must be a non-empty array/],
  ];
  for (const [name, options, error, message] of invalid) {
    test(`rejects ${name}`, () => {
      assert.throws(
        () => clientIp(options as never),
        (thrown: unknown) => {
          assert.ok(thrown instanceof error, `expected a ${error.name}, got ${String(thrown)}`);
          assert.match((thrown as Error).message, message);
          return true;
        },
      );
    });
  }
});

describe('clientIp() properties', () => {
  // Characters that reach every branch of the parsers, and then some.
  const headerText = fc.oneof(
    fc.string({
      unit: fc.constantFrom(...'0123456789abcdefx:.[]%,; \t="\\_-forFOR'.split('')),
      maxLength: 80,
    }),
    fc.string({ unit: 'binary', maxLength: 80 }),
    fc.ipV4().map((ip) => `for=${ip}`),
    fc.ipV4Extended(),
    fc.ipV6(),
  );
  const headerValue = fc.oneof(headerText, fc.array(headerText, { maxLength: 4 }));
  const headers = fc.record({ 'x-forwarded-for': headerValue, forwarded: headerValue }, { requiredKeys: [] });
  const peers = fc.oneof(
    fc.ipV4(),
    fc.ipV6(),
    fc.ipV4().map((ip) => `::ffff:${ip}`),
  );

  test('never throws, and an untrusted peer is always keyed by its own address', () => {
    const plain = clientIp();
    const trusting = clientIp({ trustedProxies: ['10.0.0.0/8', 'fd00::/8'] });
    const hops = clientIp({ trustedHops: 3 });
    fc.assert(
      fc.property(peers, headers, (peer, sent) => {
        const own = plain(request(peer));
        assert.equal(plain(request(peer, sent)), own);
        assert.equal(typeof trusting(request(PROXY, sent)), 'string');
        assert.equal(typeof hops(request(peer, sent)), 'string');
        if (own.startsWith('10.') || /^fd[0-9a-f]{2}:/.test(own)) return;
        assert.equal(trusting(request(peer, sent)), own);
      }),
      { numRuns: 2000 },
    );
  });

  test('what a client sends left of a trusted proxy entry never changes the key', () => {
    const key = clientIp({ trustedProxies: ['10.0.0.0/8'] });
    fc.assert(
      fc.property(headerText, (sent) => {
        assert.equal(key(request(PROXY, { 'x-forwarded-for': `${sent}, ${CLIENT}` })), CLIENT);
        assert.equal(key(request(PROXY, { 'x-forwarded-for': [sent, CLIENT] })), CLIENT);
        assert.equal(key(request(PROXY, { forwarded: `${sent}, for=${CLIENT}` })), CLIENT);
      }),
      { numRuns: 2000 },
    );
  });

  test('parseIPv4 accepts exactly what ipaddr.js isValidFourPartDecimal accepts', () => {
    const candidates = fc.oneof(
      fc.ipV4(),
      fc.ipV4Extended(),
      fc.string({ unit: fc.constantFrom(...'0123456789.x'.split('')), maxLength: 20 }),
      fc.tuple(fc.nat(999), fc.nat(999), fc.nat(999), fc.nat(999)).map((parts) => parts.join('.')),
    );
    fc.assert(
      fc.property(candidates, (text) => {
        assert.equal(parseIPv4(text) >= 0, ipaddr.IPv4.isValidFourPartDecimal(text), text);
        if (parseIPv4(text) >= 0) {
          assert.deepEqual(
            [
              parseIPv4(text) >>> 24,
              (parseIPv4(text) >>> 16) & 255,
              (parseIPv4(text) >>> 8) & 255,
              parseIPv4(text) & 255,
            ],
            ipaddr.IPv4.parse(text).octets,
          );
        }
      }),
      { numRuns: 5000 },
    );
  });

  test('formatIPv6 writes what ipaddr.js toString() writes', () => {
    // Zero-heavy groups, so that runs of zeros and ties between them are common.
    const group = fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
    fc.assert(
      fc.property(fc.array(group, { minLength: 8, maxLength: 8 }), (parts) => {
        assert.equal(formatIPv6(parts), new ipaddr.IPv6(parts).toString());
      }),
      { numRuns: 5000 },
    );
  });
});
