import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PauseBook } from '../../src/fetch/pause-book.ts';
import { handClock } from './server.ts';

function book(maxEntries = 10, random = () => 0) {
  const clock = handClock();
  return { clock, pauses: new PauseBook({ maxMs: 60_000, jitter: 0.5, maxEntries, clock, random }) };
}

test('a pause ends on time, is capped, and jitter only adds', () => {
  const { clock, pauses } = book(10, () => 0.5);
  assert.equal(pauses.pause('a', 1000), 1250);
  assert.equal(pauses.pause('b', 600_000), 75_000, 'capped at 60 s, then +25 %');
  clock.advance(1249);
  assert.equal(pauses.remaining('a'), 1);
  clock.advance(1);
  assert.equal(pauses.remaining('a'), 0);
  assert.equal(pauses.remaining('unknown'), 0);
});

test('pauses only extend', () => {
  const { clock, pauses } = book();
  pauses.pause('a', 10_000);
  clock.advance(1000);
  assert.equal(pauses.pause('a', 2000), 9000, 'a shorter answer does not shorten the pause');
  assert.equal(pauses.pause('a', 20_000), 20_000);
});

test('bounded: ended pauses go first, then the one that ends soonest', () => {
  const { clock, pauses } = book(2);
  pauses.pause('ended', 100);
  pauses.pause('long', 50_000);
  clock.advance(200);
  pauses.pause('new', 10_000);
  assert.equal(pauses.size, 2);
  assert.equal(pauses.remaining('long'), 49_800);
  pauses.pause('newer', 30_000);
  assert.equal(pauses.size, 2);
  assert.equal(pauses.remaining('new'), 0, 'the soonest to end was forgotten');
  assert.equal(pauses.remaining('long'), 49_800);
  assert.equal(pauses.remaining('newer'), 30_000);
});
