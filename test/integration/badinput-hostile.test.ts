/**
 * Hostile bytes through a plain AMQP publish: U+0000 and other control characters in every
 * header, property and envelope field, blank and over-long ids, duplicate JSON keys, and the
 * same invalid message twice. Every message must settle at once (applied or quarantined,
 * never retried), every quarantined one with its exact body and properties, and a replay
 * must re-publish exactly those.
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import { applyIncrement, type Consumer, type EventEnvelope, type Settlement } from '../../src/index.js';
import { listQuarantine, replayQuarantined, showQuarantined } from '../../src/ops/index.js';
import { describe, test, waitFor, orderEvent } from '../support/rig.js';
import { ROUTING_KEY, withBadInputRig } from '../support/badinput-rig.js';

/** Every C0 control character, U+0000 first, and DEL. */
const CONTROLS = `\u0000${Array.from({ length: 31 }, (_, i) => String.fromCharCode(i + 1)).join('')}\u007f`;

interface Case {
  label: string;
  body: Buffer;
  properties: amqp.Options.Publish;
  /** 'applied', or the quarantine reason. */
  expect: string;
  eventId?: string;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const event = (eventId: string, overrides: Partial<EventEnvelope> = {}) =>
  orderEvent(eventId, 'o-hostile', 1, { occurredAt: '2026-01-01T00:00:00.000Z', ...overrides });

/**
 * String-valued properties a publisher may set freely (userId must match the login,
 * expiration must be digits, and RabbitMQ drops clusterId).
 */
const FREE_PROPERTIES = [
  'messageId',
  'correlationId',
  'type',
  'appId',
  'replyTo',
  'contentType',
  'contentEncoding',
] as const;

function corpus(): Case[] {
  const invalid = json({ ...event('H-invalid'), kind: 'sideways' });
  const cases: Case[] = [
    {
      label: 'nul-header-value',
      body: invalid,
      properties: { headers: { 'x-evil': `a${CONTROLS}b` } },
      expect: 'invalid-envelope',
    },
    {
      label: 'nul-header-key',
      body: invalid,
      properties: { headers: { [`x-${CONTROLS}`]: 'v', nested: { inner: `\u0000`, list: ['\u0000', 1] } } },
      expect: 'invalid-envelope',
    },
    ...FREE_PROPERTIES.map((name) => ({
      label: `nul-property-${name}`,
      body: invalid,
      properties: { [name]: `${name}${CONTROLS}` },
      expect: 'invalid-envelope',
    })),
    {
      label: 'nul-header-on-unknown-type',
      body: json(event('H-unknown', { eventType: 'OrderTeleported' })),
      properties: { headers: { 'x-evil': '\u0000' }, messageId: 'M\u0000' },
      expect: 'unknown-event-type',
      eventId: 'H-unknown',
    },
    {
      label: 'nul-header-on-conflict',
      body: json(event('H-applied', { payload: { delta: 99 } })),
      properties: { headers: { 'x-evil': '\u0000' }, type: 'T\u0000' },
      expect: 'content-conflict',
      eventId: 'H-applied',
    },
    {
      label: 'blank-event-id',
      body: json(event('   ')),
      properties: {},
      expect: 'invalid-envelope',
    },
    {
      label: 'long-event-id',
      body: json(event('e'.repeat(201))),
      properties: {},
      expect: 'invalid-envelope',
    },
    {
      label: 'long-aggregate-id',
      body: json(orderEvent('H-long', 'a'.repeat(201))),
      properties: {},
      expect: 'invalid-envelope',
    },
  ];
  for (const field of ['eventId', 'aggregateId', 'tenantId'] as const) {
    cases.push({
      label: `nul-field-${field}`,
      body: json(event(`H-nul-${field}`, { [field]: `x\u0000y` })),
      properties: {},
      expect: 'invalid-envelope',
    });
    cases.push({
      label: `blank-field-${field}`,
      body: json(event(`H-blank-${field}`, { [field]: ' \t\n\u00a0' })),
      properties: {},
      expect: 'invalid-envelope',
    });
  }
  for (const field of ['aggregateType', 'eventType', 'occurredAt', 'traceparent'] as const)
    cases.push({
      label: `control-field-${field}`,
      body: json({ ...event(`H-control-${field}`), [field]: `a${CONTROLS}` }),
      properties: {},
      expect: 'invalid-envelope',
    });
  cases.push({
    label: 'nul-in-payload',
    body: json(event('H-nul-payload', { payload: { delta: 1, note: '\u0000', ['k\u0000']: 1 } })),
    properties: {},
    expect: 'invalid-envelope',
  });
  // Storable control characters in ids are data: the event applies, the ids kept as sent.
  cases.push({
    label: 'control-chars-in-ids',
    body: json(orderEvent(`H-ctl-${CONTROLS.slice(1)}`, `o-${CONTROLS.slice(1)}`, 1)),
    properties: { headers: { 'x-evil': CONTROLS.slice(1) } },
    expect: 'applied',
  });
  // Duplicate keys: JSON.parse keeps the last one, so this is event H-dup-last, applied once.
  const dup = JSON.stringify(orderEvent('H-dup-last', 'o-dup', 1)).replace('{', '{"eventId":"H-dup-first",');
  cases.push({ label: 'duplicate-keys', body: Buffer.from(dup), properties: {}, expect: 'applied' });
  return cases;
}

describe('hostile bytes through a plain AMQP publish', () => {
  test('every hostile message settles at once, quarantined ones with their exact bytes and properties, identical invalid ones in one open row, and a replay re-publishes them exactly', async () => {
    await withBadInputRig('cvhostile', async ({ db, channel, publisher, start, publish, brokerName }) => {
      const replayQueue = brokerName('replay');
      const settled: Settlement[] = [];
      const consumer: Consumer = start({ handlers: { AmountAdded: async () => undefined } });
      consumer.on('settled', (s) => settled.push(s));
      await consumer.ready();
      await channel.assertQueue(replayQueue, { durable: false });
      await publish('first', json(event('H-applied')), {});
      await waitFor(() => settled.length === 1, 'the first event applied');

      const cases = corpus();
      for (const c of cases) await publish(c.label, c.body, c.properties);
      // The same invalid message, byte for byte and with the same properties, a second time.
      const twice = ['nul-header-value', 'long-event-id'].map((label) => cases.find((c) => c.label === label)!);
      for (const c of twice) await publish(c.label, c.body, c.properties);

      await waitFor(() => settled.length === cases.length + 3, 'every delivery settled', 30_000);
      assert.equal(consumer.stats.retried, 0, 'nothing was retried: each was judged at once');

      const rows = await listQuarantine(db.pool, { schema: db.schema, limit: 1000 });
      const quarantinedCases = cases.filter((c) => c.expect !== 'applied');
      assert.equal(rows.length, quarantinedCases.length, 'one open row per distinct message');
      const byLabel = new Map<string, NonNullable<Awaited<ReturnType<typeof showQuarantined>>>>();
      for (const row of rows) {
        const message = await showQuarantined(db.pool, row.id, { schema: db.schema });
        assert.ok(message);
        byLabel.set(String(message.properties.headers?.['x-test-case']), message);
      }
      for (const c of quarantinedCases) {
        const message = byLabel.get(c.label);
        assert.ok(message, `a quarantine row for ${c.label}`);
        assert.equal(message.reason, c.expect, c.label);
        assert.equal(message.eventId, c.eventId ?? null, c.label);
        assert.ok(message.body.equals(c.body), `${c.label}: the body is kept byte for byte`);
        for (const [name, value] of Object.entries(c.properties))
          if (name !== 'headers')
            assert.equal(message.properties[name], value, `${c.label}: property ${name} kept exactly`);
        assert.deepEqual(
          message.properties.headers,
          { 'x-test-case': c.label, ...c.properties.headers },
          `${c.label}: headers kept exactly`,
        );
      }
      for (const c of twice) {
        const { rows: seen } = await db.pool.query<{ times_seen: number }>(
          `SELECT times_seen FROM "${db.schema}".quarantine WHERE id = $1`,
          [byLabel.get(c.label)!.id],
        );
        assert.equal(seen[0]?.times_seen, 2, `${c.label}: the identical second copy updated the open row`);
      }

      // Applied: the storable control characters and the last of the duplicate keys.
      const { rows: inbox } = await db.pool.query<{ event_id: string; aggregate_id: string }>(
        `SELECT event_id, aggregate_id FROM "${db.schema}".inbox ORDER BY event_id`,
      );
      assert.deepEqual(
        inbox.map((r) => r.event_id),
        ['H-applied', `H-ctl-${CONTROLS.slice(1)}`, 'H-dup-last'].sort(),
      );
      assert.ok(inbox.some((r) => r.aggregate_id === `o-${CONTROLS.slice(1)}`));

      // Replay re-publishes the exact bytes and properties, U+0000 included.
      const hostile = byLabel.get('nul-header-key')!;
      await replayQuarantined(db.pool, publisher, { id: hostile.id, queue: replayQueue, schema: db.schema });
      const got = await waitFor(async () => (await channel.get(replayQueue, { noAck: true })) || false, 'the replay');
      assert.ok(got.content.equals(hostile.body), 'replayed body is byte-identical');
      // Converge's own (signed) replay headers come on top of the publisher's headers.
      const {
        'x-converge-replay-of': replayOf,
        'x-converge-replay-token': _token,
        'x-converge-signature': _signature,
        'x-converge-original-exchange': _exchange,
        'x-converge-original-routing-key': _routingKey,
        ...headers
      } = (got.properties.headers ?? {}) as Record<string, unknown>;
      assert.equal(replayOf, hostile.id);
      assert.deepEqual(headers, hostile.properties.headers, 'replayed headers are exact');
      const property = byLabel.get('nul-property-correlationId')!;
      await replayQuarantined(db.pool, publisher, { id: property.id, queue: replayQueue, schema: db.schema });
      const got2 = await waitFor(async () => (await channel.get(replayQueue, { noAck: true })) || false, 'the replay');
      assert.equal(got2.properties.correlationId, `correlationId${CONTROLS}`);
      assert.ok(got2.content.equals(property.body));
    });
  });

  test('an early event whose headers hold U+0000 parks with its exact headers and drains instead of retrying', async () => {
    await withBadInputRig('cvhostile', async ({ db, channel, exchange, start }) => {
      const seen: unknown[] = [];
      const settled: Settlement[] = [];
      const consumer: Consumer = start({
        handlers: {
          AmountAdded: async (e, { tx }) => {
            await applyIncrement(tx, { projection: 'p', event: e, schema: db.schema }, () => tx.query('SELECT 1'));
            seen.push(e.eventId);
          },
        },
      });
      consumer.on('settled', (s) => settled.push(s));
      await consumer.ready();
      const headers = { 'x-evil': `a${CONTROLS}`, [`k${CONTROLS}`]: 1 };
      channel.publish(exchange, ROUTING_KEY, json(orderEvent('P-2', 'o-park', 2)), { headers, messageId: 'm\u0000' });
      await channel.waitForConfirms();
      await waitFor(() => settled.some((s) => s.action === 'ack' && s.outcome === 'parked'), 'the early event parked');
      const { rows } = await db.pool.query<{ properties_exact: string }>(
        `SELECT properties_exact FROM "${db.schema}".parked`,
      );
      assert.equal(rows.length, 1);
      const stored = JSON.parse(rows[0]!.properties_exact) as { properties: { headers: unknown; messageId: unknown } };
      assert.deepEqual(stored.properties.headers, headers);
      assert.equal(stored.properties.messageId, 'm\u0000');
      channel.publish(exchange, ROUTING_KEY, json(orderEvent('P-1', 'o-park', 1)), {});
      await channel.waitForConfirms();
      // The handler runs before its transaction commits; `drained` comes after the commit that unparks.
      await waitFor(() => consumer.stats.drained === 1, 'the parked event drained');
      assert.deepEqual(seen, ['P-1', 'P-2']);
      assert.equal(consumer.stats.retried, 0, 'parking never failed');
      const { rows: left } = await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${db.schema}".parked`);
      assert.equal(left[0]?.n, '0');
    });
  });
});
