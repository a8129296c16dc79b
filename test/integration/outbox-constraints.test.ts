/**
 * Rows written to the outbox with plain SQL that every consumer would reject: the table's
 * checks refuse them, and the relay marks what slips past (rows from before migration 11,
 * limits SQL does not measure the way JavaScript does) failed instead of publishing it.
 * Also: a consumer with no `schemas` entry for an event type handles only schemaVersion 1.
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import { Relay, silentLogger } from '../../src/index.js';
import { withEnv, envelope, quarantineRows } from '../support/consumer-env.js';
import {
  describe,
  test,
  AMQP_URL,
  DATABASE_URL,
  connectRabbit,
  createTestSchema,
  dropBrokerNames,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';

const COLUMNS = [
  'event_id',
  'aggregate_type',
  'aggregate_id',
  'aggregate_version',
  'event_type',
  'payload',
  'tenant_id',
  'traceparent',
] as const;
type Row = Partial<Record<(typeof COLUMNS)[number], string | number | null>>;

function row(overrides: Row = {}): Row {
  return {
    event_id: uniqueName('ev'),
    aggregate_type: 'order',
    aggregate_id: 'o-1',
    aggregate_version: 1,
    event_type: 'OrderPaid',
    payload: '{"amount": 10}',
    tenant_id: null,
    traceparent: null,
    ...overrides,
  };
}

async function insert(db: TestDatabase, values: Row): Promise<void> {
  const full = row(values);
  await db.pool.query(
    `INSERT INTO "${db.schema}".outbox (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`,
    COLUMNS.map((column) => full[column]),
  );
}

const MAX_SAFE = String(Number.MAX_SAFE_INTEGER);
const ASTRAL = '\u{1F600}';

describe('outbox table contract', () => {
  test('plain-SQL rows that break the envelope rules are refused by check constraints', async () => {
    const db = await createTestSchema('cvt_obx_chk');
    try {
      const refused: [string, Row][] = [
        ['space in aggregate_type', { aggregate_type: 'order type' }],
        ['non-ASCII letter in aggregate_type', { aggregate_type: 'ordér' }],
        ['control character in event_type', { event_type: 'Order\u0001Paid' }],
        ['empty event_type', { event_type: '' }],
        ['empty event_id', { event_id: '' }],
        ['empty aggregate_id', { aggregate_id: '' }],
        ['event_id of 201 characters', { event_id: 'e'.repeat(201) }],
        ['aggregate_id of 201 characters', { aggregate_id: 'a'.repeat(201) }],
        ['aggregate_id of 201 astral characters', { aggregate_id: ASTRAL.repeat(201) }],
        ['aggregate_type of 201 characters', { aggregate_type: 't'.repeat(201) }],
        ['event_type of 201 characters', { event_type: 'T'.repeat(201) }],
        ['aggregate_version 2^53', { aggregate_version: '9007199254740992' }],
        ['aggregate_version at the bigint maximum', { aggregate_version: '9223372036854775807' }],
        ['empty tenant_id', { tenant_id: '' }],
        ['tenant_id of 201 characters', { tenant_id: 'x'.repeat(201) }],
        ['traceparent that is not W3C', { traceparent: 'not-a-traceparent' }],
        // Hostile corpus: control, invisible and look-alike characters in the names consumers route on.
        ['tab in aggregate_type', { aggregate_type: 'order\t' }],
        ['newline in event_type', { event_type: 'OrderPaid\n' }],
        ['DEL in event_type', { event_type: 'Order\u007fPaid' }],
        ['zero-width space in aggregate_type', { aggregate_type: 'or\u200bder' }],
        ['fullwidth letters in event_type', { event_type: '\uff2f\uff52\uff44\uff45\uff52' }],
        ['slash in aggregate_type', { aggregate_type: 'order/line' }],
        ['star in event_type', { event_type: '*' }],
        ['upper-case hex in traceparent', { traceparent: '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01' }],
        [
          'traceparent with a trailing newline',
          { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n' },
        ],
        ['zero aggregate_version', { aggregate_version: 0 }],
        ['negative aggregate_version', { aggregate_version: -1 }],
        // Blank ids (migration 12): what trim leaves empty, as the consumer judges them.
        ['event_id of one space', { event_id: ' ' }],
        ['event_id of spaces', { event_id: '   ' }],
        ['event_id of tab, newline and carriage return', { event_id: '\t\n\r' }],
        ['event_id of no-break and ideographic spaces', { event_id: '\u00a0\u3000' }],
        ['event_id of a byte-order mark', { event_id: '\ufeff' }],
        ['aggregate_id of one space', { aggregate_id: ' ' }],
        ['aggregate_id of a line separator and en quads', { aggregate_id: '\u2028\u2000\u200a' }],
        ['aggregate_id of vertical tab and form feed', { aggregate_id: '\u000b\u000c' }],
        ['tenant_id of one space', { tenant_id: ' ' }],
        ['tenant_id of narrow no-break and medium math spaces', { tenant_id: '\u202f\u205f\u1680' }],
      ];
      for (const [label, values] of refused) {
        await assert.rejects(insert(db, values), (err: { code?: string }) => err.code === '23514', label);
      }
      await assert.rejects(
        db.pool.query(
          `INSERT INTO "${db.schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, occurred_at)
           VALUES ('year-10000', 'order', 'o-9', 1, 'OrderPaid', '{}', '10000-01-01 00:00:00+00')`,
        ),
        (err: { code?: string }) => err.code === '23514',
        'occurred_at past year 9999 (JavaScript writes it as +010000-..., not an ISO date the consumer accepts)',
      );
      // PostgreSQL text and jsonb cannot hold U+0000 at all: a NUL never reaches the relay, so no
      // check is needed for it. The same for a lone surrogate in the payload's JSON (text receives
      // none: UTF-8 cannot encode one, and the driver turns one into U+FFFD on its way in).
      const typeRefusals: [string, Row, string][] = [
        ['U+0000 in aggregate_id', { aggregate_id: 'o\u00001' }, '22021'],
        ['U+0000 in event_id', { event_id: '\u0000' }, '22021'],
        ['U+0000 in tenant_id', { tenant_id: 't\u0000' }, '22021'],
        ['U+0000 in traceparent', { traceparent: '\u0000' }, '22021'],
        ['\\u0000 in a payload string', { payload: '{"note": "a\\u0000b"}' }, '22P05'],
        ['\\u0000 in a payload key', { payload: '{"a\\u0000": 1}' }, '22P05'],
        ['a lone high surrogate in the payload', { payload: '{"note": "\\ud800"}' }, '22P02'],
        ['a lone low surrogate in the payload', { payload: '{"note": "\\udc00"}' }, '22P02'],
      ];
      for (const [label, values, code] of typeRefusals)
        await assert.rejects(insert(db, values), (err: { code?: string }) => err.code === code, label);
      // Whitespace inside or around a non-blank id, and characters trim keeps, are the consumer's to accept.
      for (const id of [' x ', 'a b', '\u200b', '\u180e', '\u0085'])
        await insert(db, { event_id: id, aggregate_id: id, tenant_id: id });
      await db.pool.query(`DELETE FROM "${db.schema}".outbox`);
      // The limits themselves are allowed.
      await insert(db, {
        event_id: 'e'.repeat(200),
        aggregate_type: 'a'.repeat(200),
        // Lengths count characters (code points) on both sides: 200 emoji are 400 UTF-16 units.
        aggregate_id: ASTRAL.repeat(200),
        aggregate_version: MAX_SAFE,
        event_type: 'Order.Paid:v_1-x',
        tenant_id: 't'.repeat(200),
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      });
      const { rows } = await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${db.schema}".outbox`);
      assert.equal(rows[0]!.n, '1', 'only the row within the limits was stored');
    } finally {
      await db.close();
    }
  });

  test('the blank-id checks match exactly the code points JavaScript trim removes', async () => {
    const db = await createTestSchema('cvt_obx_blank');
    try {
      const { rows } = await db.pool.query<{ code_point: number }>(
        `SELECT c AS code_point FROM generate_series(1, 1114111) c
          WHERE c NOT BETWEEN 55296 AND 57343 AND chr(c) ~ (SELECT regexp_replace(pg_get_constraintdef(oid), '^.*!~ ''(.*)''::text.*$', '\\1')
                                                           FROM pg_constraint WHERE conrelid = $1::regclass AND conname = 'outbox_envelope_event_id_not_blank')
          ORDER BY c`,
        [`"${db.schema}".outbox`],
      );
      const trimmed: number[] = [];
      for (let c = 1; c <= 0x10ffff; c++)
        if ((c < 0xd800 || c > 0xdfff) && String.fromCodePoint(c).trim() === '') trimmed.push(c);
      assert.deepEqual(
        rows.map((r) => r.code_point),
        trimmed,
      );
    } finally {
      await db.close();
    }
  });

  test('the relay marks an invalid row failed with a reason, never publishes it, and keeps later versions of its aggregate back', async () => {
    const db = await createTestSchema('cvt_obx_rel');
    const connection: amqp.ChannelModel = await connectRabbit();
    connection.on('error', () => undefined);
    const channel = await connection.createChannel();
    const exchange = uniqueName('cvt_obx_x');
    const queue = uniqueName('cvt_obx_q');
    const relay = new Relay({
      schema: db.schema,
      exchange,
      logger: silentLogger,
      amqpUrl: AMQP_URL,
      connectionString: DATABASE_URL,
    });
    try {
      await channel.assertExchange(exchange, 'topic', { durable: true });
      await channel.assertQueue(queue, { durable: false });
      await channel.bindQueue(queue, exchange, '#');
      // A row written before migration 11 added the checks (they are NOT VALID, so such rows stay).
      const outbox = `"${db.schema}".outbox`;
      const { rows: checks } = await db.pool.query<{ conname: string }>(
        `SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND conname LIKE 'outbox_envelope_%'`,
        [outbox],
      );
      for (const { conname } of checks) await db.pool.query(`ALTER TABLE ${outbox} DROP CONSTRAINT "${conname}"`);
      await insert(db, { event_id: 'bad-1', aggregate_id: 'o-1', aggregate_version: 1, event_type: 'Order Paid' });
      await insert(db, { event_id: 'next-2', aggregate_id: 'o-1', aggregate_version: 2 });
      await insert(db, { event_id: 'bad-year', aggregate_id: 'o-3', aggregate_version: 1 });
      await db.pool.query(`UPDATE ${outbox} SET occurred_at = '10000-01-01 00:00:00+00' WHERE event_id = 'bad-year'`);
      await insert(db, { event_id: 'bad-version', aggregate_id: 'o-4', aggregate_version: '9007199254740992' });
      await insert(db, { event_id: 'bad-tenant', aggregate_id: 'o-5', tenant_id: '' });
      await insert(db, { event_id: '', aggregate_id: 'o-6' });
      await insert(db, { event_id: 'good-1', aggregate_id: 'o-2', aggregate_version: 1 });

      for (let i = 0; i < 5; i++) await relay.runOnce();

      const { rows } = await db.pool.query<{ event_id: string; status: string; last_error: string | null }>(
        `SELECT event_id, status, last_error FROM ${outbox} ORDER BY position`,
      );
      const byId = new Map(rows.map((r) => [r.event_id, r]));
      assert.equal(byId.get('bad-1')!.status, 'failed');
      assert.equal(
        byId.get('bad-1')!.last_error,
        'CONVERGE_PUBLISH_UNENCODABLE: publish unencodable: EnvelopeValidationError: invalid envelope field "eventType": does not match the pattern (letters, digits, _ . : - only)',
      );
      assert.equal(byId.get('bad-year')!.status, 'failed');
      assert.match(byId.get('bad-year')!.last_error ?? '', /invalid envelope field "occurredAt"/);
      for (const [id, field] of [
        ['bad-version', 'aggregateVersion'],
        ['bad-tenant', 'tenantId'],
        ['', 'eventId'],
      ] as const) {
        assert.equal(byId.get(id)!.status, 'failed', id);
        assert.match(byId.get(id)!.last_error ?? '', new RegExp(`invalid envelope field "${field}"`), id);
      }
      assert.equal(byId.get('next-2')!.status, 'pending', 'a failed row holds back later versions of its aggregate');
      assert.equal(byId.get('good-1')!.status, 'published');

      const published: string[] = [];
      await waitFor(async () => {
        for (;;) {
          const message = await channel.get(queue, { noAck: true });
          if (message === false) break;
          published.push(String(message.properties.messageId));
        }
        return published.length >= 1;
      }, 'the valid event in the queue');
      assert.deepEqual(published, ['good-1'], 'only the valid row was published');
    } finally {
      await relay.stop();
      await dropBrokerNames(connection, [queue, exchange]);
      await connection.close();
      await db.close();
    }
  });

  test('a consumer without a schemas entry quarantines schemaVersion 2 instead of giving it to its version-1 handler', async () => {
    await withEnv(async (env) => {
      const seen: number[] = [];
      const consumer = env.start({
        handlers: { AmountAdded: async (event) => void seen.push(event.schemaVersion) },
      });
      try {
        await consumer.ready();
        await env.publish({ ...envelope('S2', 'o1', 1, { delta: 1 }), schemaVersion: 2 });
        await env.publish({ ...envelope('SMAX', 'o3', 1, { delta: 1 }), schemaVersion: Number.MAX_SAFE_INTEGER });
        await env.publish(envelope('S1', 'o2', 1, { delta: 1 }));
        await waitFor(
          () => consumer.stats.applied === 1 && consumer.stats.quarantined === 2,
          'one applied, two quarantined',
        );
        assert.deepEqual(seen, [1], 'the handler saw only the version-1 event');
        const rows = await quarantineRows(env);
        assert.deepEqual(rows.map((row) => [row.event_id, row.reason]).sort(), [
          ['S2', 'unsupported-schema-version'],
          ['SMAX', 'unsupported-schema-version'],
        ]);
        const s2 = rows.find((row) => row.event_id === 'S2')!;
        assert.match(s2.detail, /^AmountAdded schemaVersion 2 \(current 1\): .*no schemas entry for this eventType/);
      } finally {
        await consumer.stop();
      }
    });
  });

  test('a "*" handler is tied to no shape: it receives every schemaVersion', async () => {
    await withEnv(async (env) => {
      const seen: [string, number][] = [];
      const consumer = env.start({
        handlers: { '*': async (event) => void seen.push([event.eventId, event.schemaVersion]) },
      });
      try {
        await consumer.ready();
        await env.publish({ ...envelope('W2', 'o1', 1, { delta: 1 }), schemaVersion: 2 });
        await waitFor(() => consumer.stats.applied === 1, 'the version-2 event applied');
        assert.deepEqual(seen, [['W2', 2]]);
        assert.equal((await quarantineRows(env)).length, 0);
      } finally {
        await consumer.stop();
      }
    });
  });
});
