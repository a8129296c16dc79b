import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PublishError, type PublishFailure } from '../../src/runtime/errors.js';
import { chargedToEvent, lostWithConnection, onlyNacked, retryNumber } from '../../src/relay/failures.js';

const ALL: PublishFailure[] = ['nacked', 'returned', 'confirm-timeout', 'channel-closed', 'unencodable'];

test('only what the event itself causes is charged to it: a return and an unencodable row', () => {
  assert.deepEqual(
    ALL.filter((reason) => chargedToEvent(reason)),
    ['returned', 'unencodable'],
  );
});

test('nacks, lost confirms and lost channels are the broker refusing, never charged to the event', () => {
  for (const reason of ['nacked', 'confirm-timeout', 'channel-closed'] as const)
    assert.equal(chargedToEvent(reason), false, reason);
});

test('a lost confirm or channel is lost with the connection; a nack or return came over a working one', () => {
  assert.deepEqual(
    ALL.filter((reason) => lostWithConnection(new PublishError(reason))),
    ['confirm-timeout', 'channel-closed'],
  );
});

test('the backoff grows with every failed publish of the row, charged or not', () => {
  assert.equal(retryNumber({ attempts: 0, broker_retries: 0 }), 1);
  assert.equal(retryNumber({ attempts: 0, broker_retries: 6 }), 7, 'a broker refusing for long backs off too');
  assert.equal(retryNumber({ attempts: 2, broker_retries: 3 }), 6);
});

test('a batch with nacks and no confirm costs its channel; one confirm keeps it', () => {
  const nack = new PublishError('nacked');
  assert.equal(onlyNacked(0, [nack, nack]), true);
  assert.equal(onlyNacked(1, [nack]), false, 'the channel still delivers');
  assert.equal(onlyNacked(0, [new PublishError('returned')]), false, 'a return says nothing about the channel');
});
