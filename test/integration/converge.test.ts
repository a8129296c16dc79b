/**
 * The front door end to end on PostgreSQL and RabbitMQ: one createConverge, its options given once,
 * appends on the caller's transaction, a relay and a consumer it started, projections versioned in
 * its schema (never the default one), status, and close() stopping what it started.
 */
import assert from 'node:assert/strict';
import { applyIncrement, createConverge, defineEvents, silentLogger, withTransaction } from '../../src/index.js';
import { listQuarantine } from '../../src/ops/index.js';
import { withBrokerFixture } from '../support/broker-fixture.js';
import { AMQP_URL, describe, it, waitFor } from '../support/rig.js';

type OrderEvents = { AmountAdded: { delta: number }; Noted: { text: string }; Misrouted: Record<string, never> };
const orderEvents = defineEvents<OrderEvents>();

describe('createConverge', () => {
  it('runs append → relay → consumer → projection in its own schema, and close() stops what it started', () =>
    withBrokerFixture('cvt_front', async ({ db, exchange, queue }) => {
      const converge = createConverge({
        pool: db.pool,
        amqpUrl: AMQP_URL,
        schema: db.schema,
        exchange,
        events: orderEvents,
        logger: silentLogger,
      });
      assert.deepEqual((await converge.migrate()).applied, [], 'the fixture migrated the schema already');
      await db.pool.query(`CREATE TABLE "${db.schema}".totals (id text PRIMARY KEY, amount int NOT NULL)`);
      const projection = `totals_${db.schema}`;
      const consumer = converge.startConsumer({
        queue,
        queueType: 'classic',
        bindings: ['order.#'],
        maxAttempts: 1,
        handlers: {
          AmountAdded: (event, ctx) =>
            ctx.applyIncrement({ projection, event }, () =>
              ctx.tx.query(
                `INSERT INTO "${db.schema}".totals (id, amount) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET amount = totals.amount + EXCLUDED.amount`,
                [event.aggregateId, event.payload.delta],
              ),
            ),
          // The free function on the consumer's transaction, no schema given: the consumer's, not `converge`.
          Noted: (event, ctx) =>
            applyIncrement(ctx.tx, { projection: `notes_${db.schema}`, event }, async () => 'unchanged'),
          // Another schema on a consumer's transaction is refused before anything is written.
          Misrouted: (event, ctx) =>
            applyIncrement(
              ctx.tx,
              { projection: `lost_${db.schema}`, event, schema: 'converge' },
              async () => 'unchanged',
            ),
        },
      });
      const relay = converge.startRelay({ pollIntervalMs: 20 });
      await consumer.ready({ timeoutMs: 10_000 });
      await relay.ready({ timeoutMs: 10_000 });

      await withTransaction(db.pool, async (tx) => {
        await converge.appendMany(tx, [
          {
            aggregateType: 'order',
            aggregateId: 'o-1',
            aggregateVersion: 1,
            eventType: 'AmountAdded',
            payload: { delta: 5 },
          },
          {
            aggregateType: 'order',
            aggregateId: 'o-1',
            aggregateVersion: 2,
            eventType: 'AmountAdded',
            payload: { delta: 7 },
          },
          {
            aggregateType: 'order',
            aggregateId: 'o-2',
            aggregateVersion: 1,
            eventType: 'Noted',
            payload: { text: 'hi' },
          },
        ]);
        await converge.append(tx, {
          aggregateType: 'order',
          aggregateId: 'o-3',
          aggregateVersion: 1,
          eventType: 'Misrouted',
          payload: {},
        });
      });

      const total = await waitFor(async () => {
        const { rows } = await db.pool.query<{ amount: number }>(
          `SELECT amount FROM "${db.schema}".totals WHERE id = 'o-1'`,
        );
        return rows[0]?.amount === 12 && rows[0].amount;
      }, 'both increments applied');
      assert.equal(total, 12);
      const quarantined = await waitFor(async () => {
        const rows = await listQuarantine(db.pool, { schema: db.schema });
        return rows.length === 1 && rows;
      }, 'the misrouted event quarantined');
      assert.equal(quarantined[0]!.reason, 'handler-failed');
      assert.match(quarantined[0]!.detail, /versioned in its consumer's schema/);

      const versions = await db.pool.query<{ projection: string; version: string }>(
        `SELECT projection, version FROM "${db.schema}".projection_state ORDER BY projection`,
      );
      assert.deepEqual(
        versions.rows.map((r) => [r.projection, Number(r.version)]),
        [
          [`notes_${db.schema}`, 1],
          [projection, 2],
        ],
      );
      const { rows: elsewhere } = await db.pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'converge' AND c.relname = 'projection_state'`,
      );
      if (Number(elsewhere[0]!.n) > 0) {
        const { rows } = await db.pool.query<{ n: string }>(
          `SELECT count(*) AS n FROM converge.projection_state WHERE projection LIKE $1`,
          [`%_${db.schema}`],
        );
        assert.equal(Number(rows[0]!.n), 0, 'nothing versioned in the default schema');
      }

      const status = await waitFor(async () => {
        const s = await converge.status();
        return s.outbox.pending === 0 && s;
      }, 'the outbox drained');
      assert.equal(status.outbox.published, 4);
      assert.deepEqual(status.quarantine, { 'handler-failed': 1 });

      assert.ok(relay.connected && consumer.subscribed, 'both running before close()');
      await converge.close();
      assert.equal(db.pool.ended, false, 'the pool given stays open');
      assert.equal(relay.connected, false, 'close() stopped the relay');
      assert.equal(consumer.subscribed, false, 'close() stopped the consumer');
    }));
});
