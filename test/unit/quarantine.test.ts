import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bodyMetadata, failureClass, MAX_DETAIL_CHARS, quarantine, quarantineRow } from '../../src/inbox/quarantine.js';
import { ATTEMPT_HEADER, trustHeaders } from '../../src/inbox/headers.js';
import { schemaRef } from '../../src/runtime/identifier.js';
import type { RawDelivery } from '../../src/inbox/types.js';

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

describe('quarantine rows: bounded, and never refused for what the message holds', () => {
  const delivery: RawDelivery = {
    content: Buffer.from([0xff, 0x00, 0xfe]),
    fields: { exchange: '', routingKey: 'q' },
    properties: { headers: { [ATTEMPT_HEADER]: 2_147_483_647, note: 'a\u0000b' } },
  };
  const entry = {
    consumer: 'c',
    eventId: null,
    reason: 'malformed-body' as const,
    detail: 'x'.repeat(100_000),
    fingerprint: null,
    delivery,
  };

  it('a forged attempt of 2^31-1 is stored as attempt 1, a huge detail cut (issue 26, defect 3)', () => {
    trustHeaders(delivery, Buffer.alloc(32, 1));
    const row = quarantineRow(entry);
    assert.equal(row[12], 1);
    assert.equal((row[3] as string).length, MAX_DETAIL_CHARS);
  });

  it('writes a minimal fallback row when PostgreSQL refuses the normal one for its content', async () => {
    const statements: { text: string; values?: unknown[] }[] = [];
    let inserts = 0;
    const executor = {
      async query<R>(text: string, values?: unknown[]) {
        statements.push({ text, values });
        if (text.includes('INSERT') && inserts++ === 0)
          throw Object.assign(new Error('integer out of range'), { code: '22003' });
        return { rows: [{ id: '42' }] as R[], rowCount: 1 };
      },
    };
    assert.equal(await quarantine(executor, schemaRef('s'), entry), '42');
    const texts = statements.map((s) => s.text.trim().split(/\s+/).slice(0, 3).join(' '));
    assert.deepEqual(texts, [
      'SAVEPOINT converge_quarantine',
      'INSERT INTO "s".quarantine',
      'ROLLBACK TO SAVEPOINT',
      'INSERT INTO "s".quarantine',
    ]);
    const fallback = statements[3]!.values!;
    assert.equal(fallback[2], 'malformed-body');
    assert.match(fallback[3] as string, /SQLSTATE 22003/);
    assert.equal(fallback[8], delivery.content, 'the body is kept as bytes');
    const properties = JSON.parse(fallback[7] as string) as { unstored: { propertiesBase64: string } };
    const decoded = JSON.parse(Buffer.from(properties.unstored.propertiesBase64, 'base64').toString('utf8')) as {
      headers: Record<string, unknown>;
    };
    assert.deepEqual(decoded.headers.note, 'a\u0000b');
  });

  it('does not hide a failure that is not about the content (a lost connection)', async () => {
    const executor = {
      async query<R>(text: string) {
        if (text.includes('INSERT')) throw Object.assign(new Error('terminated'), { code: '57P01' });
        return { rows: [] as R[], rowCount: 0 };
      },
    };
    await assert.rejects(quarantine(executor, schemaRef('s'), entry), /terminated/);
  });
});
