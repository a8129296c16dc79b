import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ATTEMPT_HEADER,
  MAX_ATTEMPT,
  ORIGIN_EXCHANGE_HEADER,
  REPLAY_OF_HEADER,
  REPLAY_TOKEN_HEADER,
  SIGNATURE_HEADER,
  newReplayToken,
  originOf,
  parseConvergeHeaders,
  readAttempt,
  readReplayOf,
  retryHeaders,
  signedHeaders,
  trustHeaders,
  verifyConvergeHeaders,
} from '../../src/inbox/headers.js';
import type { RawDelivery } from '../../src/inbox/types.js';

const key = Buffer.alloc(32, 7);
const otherKey = Buffer.alloc(32, 8);
const body = Buffer.from('{"eventId":"e-1"}');

function delivery(headers: Record<string, unknown>, content = body): RawDelivery {
  return { content, fields: { exchange: '', routingKey: 'q' }, properties: { messageId: 'e-1', headers } };
}

describe('converge headers: trusted only when converge signed them', () => {
  it('ignores a forged attempt, however large: the delivery is on its first attempt (issue 26, defect 3)', () => {
    for (const forged of [2_147_483_647, 1e9, 5, 2 ** 53, -1, '3', 1.5]) {
      const d = delivery({ [ATTEMPT_HEADER]: forged });
      assert.deepEqual(trustHeaders(d, key), [ATTEMPT_HEADER], String(forged));
      assert.equal(readAttempt(d), 1, String(forged));
    }
  });

  it('honours an attempt converge signed, and refuses the same headers on another body or messageId', () => {
    const headers = signedHeaders(key, 'e-1', body, { attempt: 3, originExchange: 'orders', originRoutingKey: 'o.1' });
    const d = delivery(headers);
    assert.deepEqual(trustHeaders(d, key), []);
    assert.equal(readAttempt(d), 4);
    assert.deepEqual(originOf(d), { exchange: 'orders', routingKey: 'o.1' });
    assert.deepEqual(verifyConvergeHeaders(key, delivery(headers, Buffer.from('{}'))).trusted, {});
    assert.deepEqual(verifyConvergeHeaders(otherKey, d).trusted, {});
    assert.deepEqual(verifyConvergeHeaders(null, d).trusted, {});
    const moved = { ...d, properties: { ...d.properties, messageId: 'e-2' } };
    assert.deepEqual(verifyConvergeHeaders(key, moved).trusted, {});
    // One value changed under a valid signature: nothing of it counts.
    const raised = delivery({ ...headers, [ATTEMPT_HEADER]: 1_000 });
    assert.equal(trustHeaders(raised, key).length, 4);
    assert.equal(readAttempt(raised), 1);
    assert.deepEqual(originOf(raised), { exchange: '', routingKey: 'q' });
  });

  it('reads only headers the message carries itself, never names inherited through the prototype', () => {
    const inherited = Object.create(signedHeaders(key, 'e-1', body, { attempt: 3 })) as Record<string, unknown>;
    const d = delivery(inherited);
    assert.deepEqual(verifyConvergeHeaders(key, d), { trusted: {}, untrusted: [] });
    assert.deepEqual(parseConvergeHeaders(inherited), { values: {}, invalid: [] });
  });

  it('a delivery never checked trusts nothing (an older converge sent unsigned headers)', () => {
    const d = delivery({ [ATTEMPT_HEADER]: 4, [ORIGIN_EXCHANGE_HEADER]: 'orders', [REPLAY_OF_HEADER]: '7' });
    assert.equal(readAttempt(d), 1);
    assert.equal(readReplayOf(d), null);
    assert.deepEqual(originOf(d), { exchange: '', routingKey: 'q' });
  });

  it('a forged replay-of, with or without a token, is not a replay (issue 26, defect 4)', () => {
    const token = newReplayToken();
    for (const headers of [
      { [REPLAY_OF_HEADER]: '7' },
      { [REPLAY_OF_HEADER]: '7', [REPLAY_TOKEN_HEADER]: token },
      { [REPLAY_OF_HEADER]: '7', [REPLAY_TOKEN_HEADER]: token, [SIGNATURE_HEADER]: '0'.repeat(64) },
    ]) {
      const d = delivery(headers);
      assert.ok(trustHeaders(d, key).includes(REPLAY_OF_HEADER));
      assert.equal(readReplayOf(d), null);
    }
    const real = delivery(signedHeaders(key, 'e-1', body, { replayOf: '7', replayToken: token }));
    assert.deepEqual(trustHeaders(real, key), []);
    assert.deepEqual(readReplayOf(real), { id: '7', token });
  });

  it('the retry copy carries the next attempt, signed, and a trusted replay only', () => {
    const token = newReplayToken();
    const first = delivery(signedHeaders(key, 'e-1', body, { replayOf: '9', replayToken: token }));
    trustHeaders(first, key);
    const copy = delivery(retryHeaders(first, 'e-1', 1));
    assert.deepEqual(trustHeaders(copy, key), []);
    assert.equal(readAttempt(copy), 2);
    assert.deepEqual(readReplayOf(copy), { id: '9', token });
    const forged = delivery({ [REPLAY_OF_HEADER]: '9', [REPLAY_TOKEN_HEADER]: token });
    trustHeaders(forged, key);
    const forgedCopy = retryHeaders(forged, 'e-1', 1);
    assert.equal(forgedCopy[REPLAY_OF_HEADER], undefined, 'a forged replay-of is not passed on, signed');
  });

  it('bounds every value before it is used: out of range is invalid, never clamped into a column', () => {
    const { values, invalid } = parseConvergeHeaders({
      [ATTEMPT_HEADER]: MAX_ATTEMPT + 1,
      [ORIGIN_EXCHANGE_HEADER]: 'a\u0000b',
      'x-converge-original-routing-key': 'r'.repeat(256),
      [REPLAY_OF_HEADER]: '1'.repeat(19),
      [REPLAY_TOKEN_HEADER]: 'not hex',
    });
    assert.deepEqual(values, {});
    assert.equal(invalid.length, 5);
    assert.deepEqual(parseConvergeHeaders({ [ATTEMPT_HEADER]: 4n, [REPLAY_OF_HEADER]: 12 }).values, {
      attempt: 4,
      replayOf: '12',
    });
  });
});
