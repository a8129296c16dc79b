import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bodyMetadata, failureClass } from '../../src/inbox/quarantine.js';

describe('quarantine metadata', () => {
  it('reads eventType and schemaVersion from a JSON body, and nothing from anything else', () => {
    assert.deepEqual(bodyMetadata(Buffer.from('{"eventType":"OrderPaid","schemaVersion":2}')), {
      eventType: 'OrderPaid',
      schemaVersion: 2,
    });
    assert.deepEqual(bodyMetadata(Buffer.from('{"eventType":7,"schemaVersion":"2"}')), {
      eventType: null,
      schemaVersion: null,
    });
    assert.deepEqual(bodyMetadata(Buffer.from('{"schemaVersion":99999999999}')), {
      eventType: null,
      schemaVersion: null,
    });
    for (const body of ['not json', '', 'null', '[1,2]', '{"eventType":'])
      assert.deepEqual(bodyMetadata(Buffer.from(body)), { eventType: null, schemaVersion: null }, body);
  });

  it('classes a message retried or returned to its limit as exhausted, everything else as permanent', () => {
    assert.equal(failureClass('handler-failed'), 'exhausted');
    assert.equal(failureClass('delivery-limit-exceeded'), 'exhausted');
    for (const reason of [
      'content-conflict',
      'invalid-envelope',
      'malformed-body',
      'body-too-large',
      'unknown-event-type',
      'stale-version',
      'handler-permanent',
      'unsupported-schema-version',
      'dead-lettered',
      'undecodable-headers',
    ] as const)
      assert.equal(failureClass(reason), 'permanent');
  });
});
