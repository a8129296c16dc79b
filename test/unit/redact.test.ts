/**
 * Personal data in payloads (src/envelope/redact.ts, defineEvents' `sensitive`, displayQuarantined):
 * masking by path, the header's encoding, what the producer keeps of a payload, how a display masks.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { defineEvents, producePayload } from '../../src/envelope/events.js';
import {
  REDACTED,
  SENSITIVE_HEADER,
  decodeSensitivePaths,
  encodeSensitivePaths,
  keepDeclared,
  redactPaths,
  scrubDetail,
  scrubText,
  sensitiveValues,
} from '../../src/envelope/redact.js';
import { displayQuarantined, type QuarantinedMessage } from '../../src/ops/dlq.js';
import { ConfigError, PayloadValidationError } from '../../src/runtime/errors.js';

const customer = {
  name: 'Ada',
  email: 'ada@example.com',
  address: { street: 'Main St 1', city: 'Basel' },
  contacts: [{ phone: '+41 11', kind: 'home' }, { kind: 'none' }],
};

describe('redactPaths', () => {
  it('masks top-level and nested fields, and whole subtrees', () => {
    assert.deepEqual(redactPaths(customer, ['email', 'address.street']), {
      ...customer,
      email: REDACTED,
      address: { street: REDACTED, city: 'Basel' },
    });
    assert.deepEqual(redactPaths(customer, ['address']), { ...customer, address: REDACTED });
  });

  it('applies a path to every element of an array on its way', () => {
    const masked = redactPaths(customer, ['contacts.phone']) as typeof customer;
    assert.deepEqual(masked.contacts, [{ phone: REDACTED, kind: 'home' }, { kind: 'none' }]);
    assert.deepEqual(redactPaths([{ email: 'a@b' }, { email: 'c@d' }], ['email']), [
      { email: REDACTED },
      { email: REDACTED },
    ]);
  });

  it('leaves missing paths, scalars and the input itself alone', () => {
    const input = structuredClone(customer);
    assert.equal(redactPaths(input, ['nope', 'address.zip', 'name.first', 'email.x']), input, 'same object back');
    redactPaths(input, ['email', 'contacts.phone']);
    assert.deepEqual(input, customer, 'never modified in place');
    assert.equal(redactPaths('text', ['email']), 'text');
    assert.equal(redactPaths(null, ['email']), null);
  });
});

describe('sensitive paths on the wire', () => {
  it('round-trips through the header text; empty means declared none; anything unreadable is unknown', () => {
    assert.equal(encodeSensitivePaths(['email', 'address.street']), 'email,address.street');
    assert.deepEqual(decodeSensitivePaths('email,address.street'), ['email', 'address.street']);
    assert.deepEqual(decodeSensitivePaths(Buffer.from('email')), ['email']);
    assert.deepEqual(decodeSensitivePaths(''), []);
    assert.equal(decodeSensitivePaths(undefined), undefined);
    assert.equal(decodeSensitivePaths(42), undefined);
    assert.equal(decodeSensitivePaths('email,,x'), undefined);
    assert.equal(decodeSensitivePaths('a..b'), undefined);
  });
});

describe('sensitiveValues and scrubText', () => {
  it('collects the values at the paths (all of them for unknown), longest first, and masks them in text', () => {
    assert.deepEqual(sensitiveValues(customer, ['email', 'contacts.phone']), ['ada@example.com', '+41 11']);
    assert.deepEqual(sensitiveValues(customer, ['address']), ['Main St 1', 'Basel']);
    assert.ok(sensitiveValues(customer, undefined).includes('ada@example.com'));
    assert.deepEqual(sensitiveValues({ code: 'ab', n: 12345 }, ['code', 'n']), ['12345'], 'two letters name nobody');
    assert.equal(
      scrubText('no account for ada@example.com at Main St 1', ['ada@example.com', 'Main St 1']),
      `no account for ${REDACTED} at ${REDACTED}`,
    );
  });
});

describe('scrubDetail', () => {
  const body = Buffer.from(JSON.stringify({ eventId: 'e1', payload: customer }));
  it('masks the values the header marks, and leaves text alone without a header or a readable body', () => {
    const detail = 'handler failed: no mailbox ada@example.com (Ada)';
    assert.equal(
      scrubDetail(detail, { [SENSITIVE_HEADER]: 'email' }, body),
      `handler failed: no mailbox ${REDACTED} (Ada)`,
    );
    assert.equal(scrubDetail(detail, { [SENSITIVE_HEADER]: '' }, body), detail);
    assert.equal(scrubDetail(detail, undefined, body), detail);
    assert.equal(scrubDetail(detail, { [SENSITIVE_HEADER]: 'email' }, Buffer.from('{no json')), detail);
  });
});

describe('keepDeclared', () => {
  it('drops the keys the output dropped, at any depth, and keeps given values (not the output)', () => {
    const given = { delta: 5, email: 'x@y', nested: { a: 1, secret: 's' }, items: [{ id: 1, pii: 'p' }] };
    const output = { delta: 5, note: 'default', nested: { a: 1 }, items: [{ id: 1 }] };
    assert.deepEqual(keepDeclared(given, output), { delta: 5, nested: { a: 1 }, items: [{ id: 1 }] });
  });

  it('keeps values whose output is of another shape as given', () => {
    assert.deepEqual(keepDeclared({ at: '2026-01-01' }, { at: new Date('2026-01-01') }), { at: '2026-01-01' });
    assert.deepEqual(keepDeclared([1, 2, 3], [1, 2]), [1, 2, 3]);
    assert.equal(keepDeclared('a', 'A'), 'a');
  });
});

describe('defineEvents sensitive option and producePayload', () => {
  const events = defineEvents(
    {
      CustomerRegistered: z.object({
        customerId: z.string(),
        email: z.string(),
        address: z.object({ street: z.string() }),
      }),
      CustomerStrict: z.strictObject({ customerId: z.string() }),
    },
    { sensitive: { CustomerRegistered: ['email', 'address.street'] } },
  );

  it('strips undeclared fields and names the sensitive paths; a type without any names none', async () => {
    const produced = await producePayload(events, 'CustomerRegistered', {
      customerId: 'c1',
      email: 'ada@example.com',
      address: { street: 'Main St 1', phone: '+41' },
      birthDate: '1815-12-10',
    });
    assert.deepEqual(produced, {
      payload: { customerId: 'c1', email: 'ada@example.com', address: { street: 'Main St 1' } },
      sensitive: ['email', 'address.street'],
    });
    assert.deepEqual((await producePayload(events, 'CustomerStrict', { customerId: 'c1' })).sensitive, []);
    assert.deepEqual(await producePayload(undefined, 'Any', { x: 1 }), { payload: { x: 1 }, sensitive: undefined });
    assert.deepEqual(await producePayload(defineEvents<{ A: { x: number } }>(), 'A', { x: 1 }), {
      payload: { x: 1 },
      sensitive: undefined,
    });
  });

  it('a strict schema rejects an undeclared field, naming the key and never its value', async () => {
    const failure = await producePayload(events, 'CustomerStrict', { customerId: 'c1', email: 'ada@example.com' }).then(
      () => assert.fail('expected PayloadValidationError'),
      (err: unknown) => err,
    );
    assert.ok(failure instanceof PayloadValidationError);
    assert.ok(!failure.message.includes('ada@example.com'), failure.message);
  });

  it('rejects a sensitive entry for a type the catalog lacks, a bad path, or an unknown option', () => {
    const schemas = { A: z.object({ email: z.string() }) };
    assert.throws(
      () => defineEvents(schemas, { sensitive: { B: ['email'] } } as never),
      (err: unknown) => err instanceof ConfigError && /sensitive\.B/.test(err.message),
    );
    assert.throws(
      () => defineEvents(schemas, { sensitive: { A: ['a,b'] } }),
      (err: unknown) => err instanceof ConfigError && /sensitive\.A\.0/.test(err.message),
    );
    assert.throws(() => defineEvents(schemas, { sensitiv: {} } as never), ConfigError);
  });
});

function quarantined(body: unknown, headers: Record<string, unknown>, detail = 'handler failed'): QuarantinedMessage {
  return {
    id: '1',
    consumer: 'c',
    eventId: 'e1',
    reason: 'handler-permanent',
    detail,
    routingKey: 'customer.CustomerRegistered',
    quarantinedAt: new Date(0),
    resolvedAt: null,
    resolution: null,
    resolutionNote: null,
    replayOutcome: null,
    replayOutcomeAt: null,
    replayQuarantineId: null,
    exchange: 'x',
    properties: { headers },
    body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
  };
}

describe('displayQuarantined', () => {
  const envelope = {
    eventId: 'e1',
    eventType: 'CustomerRegistered',
    payload: { customerId: 'c1', email: 'ada@example.com' },
  };

  it('masks the declared paths in the body and their values in the detail', () => {
    const shown = displayQuarantined(
      quarantined(envelope, { [SENSITIVE_HEADER]: 'email' }, 'Error: no mailbox ada@example.com'),
    );
    assert.equal(shown.masking, 'paths');
    assert.deepEqual(shown.sensitivePaths, ['email']);
    assert.deepEqual(JSON.parse(shown.body), { ...envelope, payload: { customerId: 'c1', email: REDACTED } });
    assert.equal(shown.detail, `Error: no mailbox ${REDACTED}`);
    assert.equal(shown.bodyBytes, Buffer.byteLength(JSON.stringify(envelope)));
  });

  it('masks the whole payload of a message that says nothing, and a body that is not a JSON object', () => {
    const unknown = displayQuarantined(quarantined(envelope, {}, 'bad ada@example.com'));
    assert.equal(unknown.masking, 'payload');
    assert.deepEqual(JSON.parse(unknown.body), { ...envelope, payload: REDACTED });
    assert.equal(unknown.detail, `bad ${REDACTED}`);
    const garbage = displayQuarantined(quarantined('not json ada@example.com', { [SENSITIVE_HEADER]: 'email' }));
    assert.deepEqual([garbage.masking, garbage.body], ['body', REDACTED]);
    const unreadable = displayQuarantined(quarantined(envelope, { [SENSITIVE_HEADER]: 'a..b' }));
    assert.equal(unreadable.masking, 'payload');
  });

  it('shows everything when asked', () => {
    const shown = displayQuarantined(quarantined(envelope, {}, 'bad ada@example.com'), { showSensitive: true });
    assert.equal(shown.masking, 'none');
    assert.deepEqual(JSON.parse(shown.body), envelope);
    assert.equal(shown.detail, 'bad ada@example.com');
  });
});
