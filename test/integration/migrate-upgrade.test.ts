/**
 * Upgrades that never block (issue 26): a schema as an older release left it, rows of every old
 * shape in it (valid and invalid, pending, published and failed), today's migrate(), then a relay
 * and a consumer. Every valid row is published in order, every invalid pending row is failed with
 * the rule it breaks named, and nothing later trips over an old row.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { Relay, migrate, silentLogger, startConsumer, type Consumer } from '../../src/index.js';
import { readStatus } from '../../src/ops/index.js';
import { outboxBlankChecks, outboxEnvelopeChecks } from '../../src/schema/outbox-checks.js';
import { migrateTo } from '../support/migrate-to.js';
import { AMQP_URL, connectPostgres, describe, test, uniqueName, waitFor } from '../support/rig.js';

type Values = Record<string, string | number | null>;
const BASE: Values = { aggregate_type: 'order', event_type: 'OrderPaid', payload: '{"amount": 1}' };

async function insert(pool: pg.Pool, schema: string, values: Values): Promise<void> {
  const row = { ...BASE, ...values };
  const columns = Object.keys(row);
  await pool.query(
    `INSERT INTO "${schema}".outbox (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
    Object.values(row),
  );
}

const refused = (constraint: string) => `CONVERGE_OUTBOX_ROW_REFUSED: constraint ${constraint} (migration 17)`;

/** Old pending rows that break one rule each, with the constraint migration 17 must name. */
const BROKEN: [Values, string][] = [
  [
    { event_id: 'bad-type', aggregate_id: 'b1', aggregate_version: 1, event_type: 'Order Paid' },
    'outbox_envelope_event_type',
  ],
  [
    { event_id: 'bad-agg-type', aggregate_id: 'b2', aggregate_version: 1, aggregate_type: 'ordér' },
    'outbox_envelope_aggregate_type',
  ],
  [{ event_id: 'e'.repeat(201), aggregate_id: 'b3', aggregate_version: 1 }, 'outbox_envelope_event_id'],
  [{ event_id: 'bad-agg-id', aggregate_id: 'a'.repeat(201), aggregate_version: 1 }, 'outbox_envelope_aggregate_id'],
  [
    { event_id: 'bad-version', aggregate_id: 'b5', aggregate_version: '9007199254740992' },
    'outbox_envelope_aggregate_version',
  ],
  [
    { event_id: 'bad-tenant', aggregate_id: 'b6', aggregate_version: 1, tenant_id: 'x'.repeat(201) },
    'outbox_envelope_tenant_id',
  ],
  [
    { event_id: 'bad-year', aggregate_id: 'b7', aggregate_version: 1, occurred_at: '10000-01-01 00:00:00+00' },
    'outbox_envelope_occurred_at',
  ],
  [
    { event_id: 'bad-trace', aggregate_id: 'b8', aggregate_version: 1, traceparent: 'nope' },
    'outbox_envelope_traceparent',
  ],
  [{ event_id: ' ', aggregate_id: 'b9', aggregate_version: 1 }, 'outbox_envelope_event_id_not_blank'],
  [
    { event_id: 'blank-agg-id', aggregate_id: '\u00a0', aggregate_version: 1 },
    'outbox_envelope_aggregate_id_not_blank',
  ],
  [
    { event_id: 'blank-tenant', aggregate_id: 'b11', aggregate_version: 1, tenant_id: ' ' },
    'outbox_envelope_tenant_id_not_blank',
  ],
];

/** Valid rows, some behind a broken one of their aggregate, and history that must stay as it is. */
async function insertOldRows(pool: pg.Pool, schema: string): Promise<void> {
  for (const [values] of BROKEN) await insert(pool, schema, values);
  await insert(pool, schema, { event_id: 'behind-bad', aggregate_id: 'b1', aggregate_version: 2 });
  for (const version of [1, 2, 3])
    await insert(pool, schema, { event_id: `ok-a-${version}`, aggregate_id: 'ok-a', aggregate_version: version });
  await insert(pool, schema, { event_id: 'ok-b-1', aggregate_id: 'ok-b', aggregate_version: 1 });
  await insert(pool, schema, {
    event_id: 'old-published',
    aggregate_id: 'h1',
    aggregate_version: 1,
    event_type: 'Old Type',
    status: 'published',
  });
  await insert(pool, schema, {
    event_id: 'old-failed',
    aggregate_id: 'h2',
    aggregate_version: 1,
    event_type: 'Old Type',
    status: 'failed',
    last_error: 'kept',
  });
}

interface OutboxState {
  status: string;
  last_error: string | null;
}

async function outboxById(pool: pg.Pool, schema: string): Promise<Map<string, OutboxState>> {
  const { rows } = await pool.query<OutboxState & { event_id: string }>(
    `SELECT event_id, status, last_error FROM "${schema}".outbox ORDER BY position`,
  );
  return new Map(rows.map(({ event_id, ...state }) => [event_id, state]));
}

function assertUpgraded(byId: Map<string, OutboxState>): void {
  for (const [values, constraint] of BROKEN) {
    const row = byId.get(String(values.event_id))!;
    assert.deepEqual(row, { status: 'failed', last_error: refused(constraint) }, String(values.event_id).slice(0, 20));
  }
  assert.equal(byId.get('old-published')!.status, 'published', 'history is left as it is');
  assert.deepEqual(byId.get('old-failed'), { status: 'failed', last_error: 'kept' });
}

/** Relay and consumer on the upgraded schema: the valid rows arrive, each aggregate in order. */
async function relayAndConsume(pool: pg.Pool, schema: string): Promise<string[]> {
  const exchange = uniqueName('cvt_upg_x');
  const queue = uniqueName('cvt_upg_q');
  const seen: string[] = [];
  const common = { amqpUrl: AMQP_URL, pool, schema, exchange, logger: silentLogger };
  const consumer: Consumer = startConsumer({
    ...common,
    queue,
    handlers: { '*': async (event) => void seen.push(event.eventId) },
  });
  const relay = new Relay(common).start();
  try {
    await consumer.ready();
    await waitFor(() => seen.length >= 4, 'the four valid, unblocked rows applied');
    return seen;
  } finally {
    await relay.stop();
    await consumer.stop();
  }
}

async function withSchema(prefix: string, work: (pool: pg.Pool, schema: string) => Promise<void>): Promise<void> {
  const pool = await connectPostgres(10);
  const schema = uniqueName(prefix);
  try {
    await work(pool, schema);
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}

describe('upgrading a schema with old rows', () => {
  test('from migration 10 (before the envelope checks of 11 and 12): broken pending rows failed with their rule, the rest flows', async () => {
    await withSchema('cvt_upg10', async (pool, schema) => {
      await migrateTo(pool, schema, 10);
      await insertOldRows(pool, schema);
      const result = await migrate(pool, { schema });
      assert.deepEqual(result.applied.slice(0, 7), [11, 12, 13, 14, 15, 16, 17]);
      assertUpgraded(await outboxById(pool, schema));
      const seen = await relayAndConsume(pool, schema);
      assert.deepEqual(
        seen.filter((id) => id.startsWith('ok-a')),
        ['ok-a-1', 'ok-a-2', 'ok-a-3'],
      );
      assert.deepEqual([...seen].sort(), ['ok-a-1', 'ok-a-2', 'ok-a-3', 'ok-b-1']);
      const byId = await outboxById(pool, schema);
      assert.equal(byId.get('behind-bad')!.status, 'pending', 'a failed row holds back its own aggregate only');
      const status = await readStatus(pool, { schema });
      assert.equal(status.outbox.failed, BROKEN.length + 1);
      assert.equal(status.outbox.failedReasons[refused('outbox_envelope_event_type')], 1);
      assert.equal(status.outbox.failedReasons.kept, 1);
    });
  });

  test('from migration 16: rows under NOT VALID checks (the issue 26 reproduction) are failed and the checks validated', async () => {
    await withSchema('cvt_upg16', async (pool, schema) => {
      await migrateTo(pool, schema, 16);
      const checks = [...outboxEnvelopeChecks(), ...outboxBlankChecks()];
      const outbox = `"${schema}".outbox`;
      await pool.query(`ALTER TABLE ${outbox} ${checks.map(([name]) => `DROP CONSTRAINT ${name}`).join(', ')}`);
      await insertOldRows(pool, schema);
      await pool.query(
        `ALTER TABLE ${outbox} ${checks.map(([name, check]) => `ADD CONSTRAINT ${name} CHECK (${check}) NOT VALID`).join(', ')}`,
      );
      assert.deepEqual((await migrate(pool, { schema })).applied.slice(0, 1), [17]);
      assertUpgraded(await outboxById(pool, schema));
      const { rows } = await pool.query<{ conname: string; convalidated: boolean }>(
        `SELECT conname, convalidated FROM pg_constraint WHERE conrelid = $1::regclass AND conname LIKE 'outbox_envelope_%' ORDER BY conname`,
        [outbox],
      );
      assert.equal(rows.length, checks.length);
      assert.ok(
        rows.every((row) => row.convalidated),
        'every envelope check is validated',
      );
      const seen = await relayAndConsume(pool, schema);
      assert.deepEqual([...seen].sort(), ['ok-a-1', 'ok-a-2', 'ok-a-3', 'ok-b-1']);
      // A failed row that still breaks its rule cannot be put back in line by hand either.
      await assert.rejects(
        pool.query(`UPDATE ${outbox} SET status = 'pending' WHERE event_id = 'bad-type'`),
        (err: { code?: string; constraint?: string }) =>
          err.code === '23514' && err.constraint === 'outbox_envelope_event_type',
      );
    });
  });

  test('migration 17 is idempotent: run again, it changes nothing and keeps valid pending rows pending', async () => {
    await withSchema('cvt_upg17', async (pool, schema) => {
      await migrateTo(pool, schema, 17);
      await insert(pool, schema, { event_id: 'fine', aggregate_id: 'f1', aggregate_version: 1 });
      await pool.query(`DELETE FROM "${schema}".migrations WHERE version = 17`);
      assert.deepEqual((await migrate(pool, { schema })).applied.slice(0, 1), [17]);
      assert.deepEqual((await outboxById(pool, schema)).get('fine'), { status: 'pending', last_error: null });
    });
  });
});
