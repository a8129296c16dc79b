/** The idempotency key, the failure kinds recorded for a person and the options of the effect executor. No I/O. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { idempotencyKey } from '../../src/effects/key.js';
import { effectOptions, errorKind } from '../../src/effects/perform.js';
import { effectsSql } from '../../src/effects/sql.js';
import { ConfigError, PermanentError } from '../../src/runtime/errors.js';
import { schemaRef } from '../../src/runtime/identifier.js';

const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const event = { eventId: '0190f7c2-3b4a-7cde-8f01-23456789abcd' };

describe('idempotencyKey', () => {
  test('is a version 8 UUID: 36 URL- and header-safe characters', () => {
    const key = idempotencyKey(event, 'send-sms');
    assert.match(key, UUID_V8);
    assert.equal(key, encodeURIComponent(key));
  });

  test('is pinned: the same pair gives this key in every process and release', () => {
    // Changing the derivation would make a redelivery after an upgrade call the remote with a new key.
    assert.equal(idempotencyKey(event, 'send-sms'), idempotencyKey({ ...event }, 'send-sms'));
    assert.equal(idempotencyKey({ eventId: 'order-1:1' }, 'send-sms'), '60f6a91e-dd10-8e88-9043-973a7844e2e4');
  });

  test('differs per effect and per event, and the parts cannot run into each other', () => {
    const keys = new Set([
      idempotencyKey(event, 'send-sms'),
      idempotencyKey(event, 'charge-card'),
      idempotencyKey({ eventId: `${event.eventId}x` }, 'send-sms'),
      idempotencyKey({ eventId: 'b:c' }, 'a'),
      idempotencyKey({ eventId: 'c' }, 'a:b'),
    ]);
    assert.equal(keys.size, 5);
  });

  test('ignores everything but the eventId: the payload never shapes the key', () => {
    const withPayload = { eventId: event.eventId, payload: { phone: '+15550100' } };
    assert.equal(idempotencyKey(withPayload, 'send-sms'), idempotencyKey(event, 'send-sms'));
  });

  test('rejects an empty, long or oddly spelled effect name, and an event without an id', () => {
    for (const effect of ['', ' send', 'send sms', 'a/b', 'x'.repeat(101), '-sms']) {
      assert.throws(() => idempotencyKey(event, effect), ConfigError, JSON.stringify(effect));
    }
    assert.doesNotThrow(() => idempotencyKey(event, 'x'.repeat(100)));
    assert.throws(() => idempotencyKey({ eventId: '' }, 'send-sms'), ConfigError);
  });
});

describe('errorKind', () => {
  test('keeps a code or a class name, never the message', () => {
    assert.equal(errorKind(new PermanentError('card 4111 declined')), 'CONVERGE_PERMANENT');
    assert.equal(errorKind(Object.assign(new Error('connect to +1555'), { code: 'ECONNRESET' })), 'ECONNRESET');
    assert.equal(errorKind(new TypeError('bad +1555')), 'TypeError');
    assert.equal(errorKind(new DOMException('t', 'TimeoutError')), 'TimeoutError');
    assert.equal(errorKind(Object.assign(new Error('x'), { code: 'user +1555 not found' })), 'Error');
    assert.equal(errorKind('a thrown string with data'), 'string');
  });
});

describe('performEffect options', () => {
  const call = async () => 'ok';

  test('defaults: three calls a run, 30 s per call, the converge schema', () => {
    const options = effectOptions.parse({ event, effect: 'send-sms', call });
    assert.equal(options.maxCalls, 3);
    assert.equal(options.timeoutMs, 30_000);
    assert.equal(options.schema, 'converge');
  });

  test('every bad field is named at once, an unknown one with the closest known name', () => {
    assert.throws(
      () => effectOptions.parse({ event: { id: 'x' }, effect: 'send sms', call: 'no', maxCall: 2 }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(err.problems.map((p) => p.path).sort(), ['call', 'effect', 'event', 'maxCall']);
        assert.match(err.message, /did you mean 'maxCalls'/);
        return true;
      },
    );
  });
});

test('effectsSql: built once per schema, naming it only quoted', () => {
  const a = schemaRef('effects_sql_a');
  assert.equal(effectsSql(a), effectsSql(schemaRef('effects_sql_a')));
  for (const text of Object.values(effectsSql(a))) {
    for (const at of text.matchAll(/effects_sql_a/g)) assert.equal(text[at.index - 1], '"');
  }
});
