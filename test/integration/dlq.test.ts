/** Quarantine round trip against the real services: list, show, replay through the consumer, discard with a reason. */
import assert from 'node:assert/strict';
import { applyIncrement, type EventEnvelope } from '../../src/index.js';
import { ConfigError, ConvergeError, PermanentError } from '../../src/errors.js';
import {
  discardQuarantined,
  listQuarantine,
  replayQuarantined,
  showQuarantined,
  type QuarantineSummary,
} from '../../src/ops/index.js';
import { withBrokerFixture } from '../support/broker-fixture.js';
import { describe, it, waitFor, orderEvent } from '../support/rig.js';

function envelope(
  eventId: string,
  eventType: string,
  aggregate: { id?: string; version?: number } = {},
): EventEnvelope {
  return orderEvent(eventId, aggregate.id ?? eventId, aggregate.version ?? 1, { eventType });
}

/** The quarantine row of `eventId` (open or closed), with what its replay did. */
async function rowOf(
  pool: QueryPool,
  schema: string,
  eventId: string,
  open: boolean,
): Promise<QuarantineSummary | undefined> {
  const rows = await listQuarantine(pool, { schema, includeResolved: true });
  return rows.find((q) => q.eventId === eventId && (q.resolvedAt === null) === open);
}

type QueryPool = Parameters<typeof listQuarantine>[0];

describe('dlq', () => {
  it('lists with filters, shows the raw message, replays it through the normal path once fixed, and discards only with a reason', () =>
    withBrokerFixture('cvq', async ({ db, publisher, queue, startConsumer, publish }) => {
      let fixed = false;
      const applied: string[] = [];
      const consumer = startConsumer({
        handlers: {
          '*': async (event) => {
            if (!fixed && event.eventType === 'Refunded') throw new PermanentError('refunds are not supported yet');
            applied.push(event.eventId);
          },
        },
      });
      await consumer.ready();
      await publish([envelope('R1', 'Refunded'), envelope('R2', 'Refunded'), envelope('P1', 'Paid')]);
      // A handler may run more than once for a batch that rolled back; only commits count.
      await waitFor(
        () => consumer.stats.quarantined === 2 && consumer.stats.applied === 1,
        'two refunds quarantined, the payment applied',
      );

      const open = await listQuarantine(db.pool, { schema: db.schema, eventType: 'Refunded' });
      assert.deepEqual(open.map((q) => [q.eventId, q.reason]).sort(), [
        ['R1', 'handler-permanent'],
        ['R2', 'handler-permanent'],
      ]);
      assert.deepEqual(await listQuarantine(db.pool, { schema: db.schema, eventType: 'Paid' }), []);
      assert.deepEqual(
        await listQuarantine(db.pool, { schema: db.schema, olderThanMs: 3_600_000 }),
        [],
        'none an hour old',
      );
      const r1 = open.find((q) => q.eventId === 'R1')!;
      const shown = await showQuarantined(db.pool, r1.id, { schema: db.schema });
      assert.equal((JSON.parse(shown!.body.toString()) as { eventId: unknown }).eventId, 'R1');
      assert.equal(shown!.properties.messageId, 'R1');

      fixed = true;
      await replayQuarantined(db.pool, publisher, {
        id: r1.id,
        queue,
        schema: db.schema,
        note: 'refund handler shipped',
      });
      await waitFor(
        () => consumer.stats.applied === 2 && applied.includes('R1'),
        'the replayed refund applied by the consumer',
      );
      const r2 = open.find((q) => q.eventId === 'R2')!;
      await assert.rejects(
        discardQuarantined(db.pool, { id: r2.id, reason: '  ', schema: db.schema }),
        (err: unknown) => err instanceof ConfigError && err.field === 'reason',
      );
      await discardQuarantined(db.pool, { id: r2.id, reason: 'duplicate refund, refunded by hand', schema: db.schema });
      await assert.rejects(
        replayQuarantined(db.pool, publisher, { id: r2.id, queue, schema: db.schema }),
        (err: unknown) => err instanceof ConvergeError && err.code === 'CONVERGE_QUARANTINE_RESOLVED',
      );
      await assert.rejects(
        replayQuarantined(db.pool, publisher, { id: '999999', queue, schema: db.schema }),
        (err: unknown) => err instanceof ConvergeError && err.code === 'CONVERGE_QUARANTINE_NOT_FOUND',
      );

      assert.deepEqual(await listQuarantine(db.pool, { schema: db.schema }), [], 'nothing open');
      const closed = await listQuarantine(db.pool, { schema: db.schema, includeResolved: true });
      assert.deepEqual(closed.map((q) => [q.eventId, q.resolution, q.resolutionNote]).sort(), [
        ['R1', 'replayed', `to ${queue}: refund handler shipped`],
        ['R2', 'discarded', 'duplicate refund, refunded by hand'],
      ]);
      const inbox = await db.pool.query<{ event_id: string }>(
        `SELECT event_id FROM "${db.schema}".inbox ORDER BY event_id`,
      );
      assert.deepEqual(
        inbox.rows.map((r) => r.event_id),
        ['P1', 'R1'],
        'the discarded refund was never applied',
      );
    }));
  it('records what a replay did on the original row: applied (original schema version, upcast), duplicate, quarantined again, parked then applied', () =>
    withBrokerFixture('cvq', async ({ db, publisher, queue, startConsumer, publish }) => {
      await db.pool.query(
        `CREATE TABLE "${db.schema}".refunds (event_id text PRIMARY KEY, aggregate_id text NOT NULL, currency text, schema_version int)`,
      );
      // Refunds fail until their eventId is taken off this list.
      const failing = new Set(['R1', 'R2', 'D1', 'A2']);
      const consumer = startConsumer({
        // Handlers are written for version 2; the stored bodies say version 1.
        schemas: { Refunded: { current: 2, upcasters: { 1: (p) => ({ ...(p as object), currency: 'EUR' }) } } },
        handlers: {
          Refunded: async (event, { tx }) => {
            if (failing.has(event.eventId)) throw new PermanentError('refunds are not supported yet');
            await applyIncrement(tx, { projection: 'refunds', event, schema: db.schema }, async () => {
              return tx.query(`INSERT INTO "${db.schema}".refunds VALUES ($1, $2, $3, $4)`, [
                event.eventId,
                event.aggregateId,
                (event.payload as { currency?: string }).currency,
                event.schemaVersion,
              ]);
            });
          },
        },
      });
      await consumer.ready();
      await publish([
        envelope('R1', 'Refunded'),
        envelope('R2', 'Refunded'),
        envelope('D1', 'Refunded'),
        envelope('A2', 'Refunded', { id: 'A', version: 2 }),
      ]);
      await waitFor(() => consumer.stats.quarantined === 4, 'four refunds quarantined');
      const original = new Map((await listQuarantine(db.pool, { schema: db.schema })).map((q) => [q.eventId!, q]));
      assert.deepEqual(
        [...original.values()].map((q) => [q.replayOutcome, q.replayOutcomeAt, q.replayQuarantineId]),
        Array(4).fill([null, null, null]),
      );

      // Applied: the consumer judges the original body again, at its original schema version, upcast for the handler.
      failing.delete('R1');
      await replayQuarantined(db.pool, publisher, { id: original.get('R1')!.id, queue, schema: db.schema });
      const r1 = await waitFor(
        async () =>
          (await rowOf(db.pool, db.schema, 'R1', false))?.replayOutcome === 'applied' &&
          rowOf(db.pool, db.schema, 'R1', false),
        'R1 replay recorded as applied',
      );
      assert.equal(r1.resolution, 'replayed');
      assert.ok(r1.replayOutcomeAt instanceof Date);
      assert.equal(r1.replayQuarantineId, null);
      const refunds = await db.pool.query(
        `SELECT event_id, currency, schema_version FROM "${db.schema}".refunds ORDER BY event_id`,
      );
      assert.deepEqual(
        refunds.rows,
        [{ event_id: 'R1', currency: 'EUR', schema_version: 2 }],
        'the effect is in the projection, upcast from version 1',
      );
      const stored = await db.pool.query<{ schema_version: number }>(
        `SELECT schema_version FROM "${db.schema}".quarantine WHERE id = $1`,
        [r1.id],
      );
      assert.equal(stored.rows[0]?.schema_version, 1, 'the replayed body kept its original version');

      // Duplicate: the producer sent the event again after the fix; the quarantined copy adds nothing.
      failing.delete('D1');
      await publish([envelope('D1', 'Refunded')]);
      await waitFor(
        async () => (await db.pool.query(`SELECT 1 FROM "${db.schema}".refunds WHERE event_id = 'D1'`)).rowCount === 1,
        'D1 applied from a fresh copy',
      );
      await replayQuarantined(db.pool, publisher, { id: original.get('D1')!.id, queue, schema: db.schema });
      await waitFor(
        async () => (await rowOf(db.pool, db.schema, 'D1', false))?.replayOutcome === 'duplicate',
        'D1 replay recorded as duplicate',
      );

      // Quarantined again: the original row points at the new open row.
      await replayQuarantined(db.pool, publisher, { id: original.get('R2')!.id, queue, schema: db.schema });
      const r2 = await waitFor(
        async () =>
          (await rowOf(db.pool, db.schema, 'R2', false))?.replayOutcome === 'quarantined' &&
          rowOf(db.pool, db.schema, 'R2', false),
        'R2 replay recorded as quarantined',
      );
      const reopened = await rowOf(db.pool, db.schema, 'R2', true);
      assert.ok(reopened, 'a new open row for R2');
      assert.notEqual(reopened.id, r2.id);
      assert.equal(r2.replayQuarantineId, reopened.id);
      assert.equal(reopened.replayOutcome, null);

      // Parked: version 2 of aggregate A waits for version 1, then applies from the reorder buffer.
      failing.delete('A2');
      await replayQuarantined(db.pool, publisher, { id: original.get('A2')!.id, queue, schema: db.schema });
      await waitFor(
        async () => (await rowOf(db.pool, db.schema, 'A2', false))?.replayOutcome === 'parked',
        'A2 replay recorded as parked',
      );
      await publish([envelope('A1', 'Refunded', { id: 'A', version: 1 })]);
      await waitFor(
        async () => (await rowOf(db.pool, db.schema, 'A2', false))?.replayOutcome === 'applied',
        'A2 recorded as applied once drained',
      );
      const a = await db.pool.query<{ event_id: string }>(
        `SELECT event_id FROM "${db.schema}".refunds WHERE aggregate_id = 'A' ORDER BY event_id`,
      );
      assert.deepEqual(
        a.rows.map((r) => r.event_id),
        ['A1', 'A2'],
      );

      // Normal deliveries never touch the quarantine table.
      const touched = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${db.schema}".quarantine WHERE replay_outcome IS NOT NULL`,
      );
      assert.equal(touched.rows[0]?.n, 4);
    }));

  it("replays to the queue the row's consumer reads when no queue is named, even with an inbox scope of its own", () =>
    withBrokerFixture('cvq_infer', async ({ db, publisher, queue, startConsumer, publish }) => {
      let fixed = false;
      const consumer = startConsumer({
        consumer: 'refund-desk', // the inbox scope, apart from the queue name
        handlers: {
          '*': async () => {
            if (!fixed) throw new PermanentError('not yet');
          },
        },
      });
      await consumer.ready();
      await publish([envelope('Q1', 'Refunded')]);
      await waitFor(() => consumer.stats.quarantined === 1, 'quarantined');
      const [row] = await listQuarantine(db.pool, { schema: db.schema });
      assert.equal(row!.consumer, 'refund-desk');

      fixed = true;
      const receipt = await replayQuarantined(db.pool, publisher, { id: row!.id, schema: db.schema });
      assert.equal(receipt.queue, queue, 'the queue from the consumer registry, not the scope name');
      await waitFor(
        async () => (await rowOf(db.pool, db.schema, 'Q1', false))?.replayOutcome === 'applied',
        'the replay applied by the consumer',
      );
      const closed = await rowOf(db.pool, db.schema, 'Q1', false);
      assert.equal(closed!.resolutionNote, `to ${queue}`);
    }));
});
