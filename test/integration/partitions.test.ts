// test-files: plain-layout, converts plain schemas itself, with intervals of its own
/**
 * The partitioned layout on the real PostgreSQL and RabbitMQ, with intervals of a second or two so
 * partitions roll while the test runs: converting a schema that has rows, keys across partitions,
 * retention dropping whole partitions under load (never one still needed), and status reporting a
 * partition that is missing before inserts fail.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import {
  appendManyToOutbox,
  appendToOutbox,
  migrate,
  withTransaction,
  type EventEnvelope,
  type Logger,
} from '../../src/index.js';
import { cleanup, readPipelineStatus, type CleanupResult } from '../../src/ops/index.js';
import { withBrokerFixture, type BrokerFixture } from '../support/broker-fixture.js';
import { AMQP_URL, describe, it, waitFor } from '../support/rig.js';
import { databaseNow, listPartitions } from '../../src/schema/partitioning.js';
import { schemaRef } from '../../src/runtime/identifier.js';

/** The partitions of one table, as retention and status read them. */
function partitions(pool: pg.Pool, schema: string, table: 'outbox' | 'inbox') {
  return listPartitions(pool, schemaRef(schema), table);
}

/** A consumer whose handler counts its calls per event in the consumer's transaction, and keeps each envelope. */
function countingConsumer(fixture: BrokerFixture, seen: Map<string, EventEnvelope>, logger?: Logger) {
  const { db } = fixture;
  const consumer = fixture.startConsumer({
    // One attempt: a failure counted as the handler's goes to the quarantine at once.
    ...(logger ? { logger, maxAttempts: 1 } : {}),
    queueType: 'classic',
    bindings: ['#'],
    handlers: {
      Placed: (event, ctx) =>
        ctx.applyIncrement({ projection: 'orders', event }, async () => {
          seen.set(event.eventId, event);
          return ctx.tx.query(
            `INSERT INTO "${db.schema}".calls (event_id, n) VALUES ($1, 1)
             ON CONFLICT (event_id) DO UPDATE SET n = calls.n + 1`,
            [event.eventId],
          );
        }),
    },
  });
  return consumer;
}

async function append(pool: pg.Pool, schema: string, aggregateId: string, version: number, eventId?: string) {
  return withTransaction(pool, (tx) =>
    appendToOutbox(
      tx,
      {
        ...(eventId ? { eventId } : {}),
        aggregateType: 'order',
        aggregateId,
        aggregateVersion: version,
        eventType: 'Placed',
        payload: { version },
      },
      { schema },
    ),
  );
}

function orderEnvelope(aggregateId: string, version: number): EventEnvelope {
  return {
    eventId: `${aggregateId}-${version}`,
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType: 'Placed',
    schemaVersion: 1,
    kind: 'incremental',
    payload: { version },
    occurredAt: new Date().toISOString(),
  };
}

async function callCounts(pool: pg.Pool, schema: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ event_id: string; n: number }>(`SELECT event_id, n FROM "${schema}".calls`);
  return new Map(rows.map((row) => [row.event_id, row.n]));
}

describe('partitioned outbox and inbox', () => {
  it('converts a schema with rows in place, keeps its keys across partitions and deduplicates redeliveries across them', () =>
    withBrokerFixture('cvt_part', async (fixture) => {
      const { db } = fixture;
      const s = db.schema;
      await db.pool.query(`CREATE TABLE "${s}".calls (event_id text PRIMARY KEY, n int NOT NULL)`);
      const early = await append(db.pool, s, 'o-1', 1);
      await append(db.pool, s, 'o-1', 2);
      const result = await migrate(db.pool, { schema: s, partitioned: { intervalMs: 2_000, ahead: 2 } });
      assert.deepEqual(result.partitioned, ['outbox', 'inbox']);
      assert.deepEqual(
        (await migrate(db.pool, { schema: s, partitioned: { intervalMs: 2_000, ahead: 2 } })).partitioned,
        [],
      );
      await assert.rejects(migrate(db.pool, { schema: s, partitioned: { intervalMs: 3_000 } }), {
        code: 'CONVERGE_INVALID_CONFIG',
      });
      const legacy = (await partitions(db.pool, s, 'outbox')).find((p) => p.name === 'outbox_legacy');
      assert.ok(legacy, 'the old table is the first partition');
      const inLegacy = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${s}".outbox_legacy`);
      assert.equal(inLegacy.rows[0]!.n, 2, 'the rows stayed where they were, not copied');

      const seen = new Map<string, EventEnvelope>();
      const consumer = countingConsumer(fixture, seen);
      const relay = fixture.startRelay();
      await consumer.ready({ timeoutMs: 10_000 });
      await relay.ready({ timeoutMs: 10_000 });
      await waitFor(() => seen.size === 2 || undefined, 'the events appended before the conversion to be applied');

      // Once the converted table's range is over, new rows land in a partition of their own.
      await waitFor(async () => (await databaseNow(db.pool)) >= legacy.toMs || undefined, 'the legacy range to end');
      const later = await append(db.pool, s, 'o-1', 3);
      const where = await db.pool.query<{ p: string }>(
        `SELECT tableoid::regclass::text AS p FROM "${s}".outbox WHERE event_id = $1`,
        [later.eventId],
      );
      assert.notEqual(where.rows[0]!.p.split('.')[1], 'outbox_legacy');
      assert.match(where.rows[0]!.p, /outbox_p\d{8}t\d{6}$/);
      await assert.rejects(append(db.pool, s, 'o-1', 2), {
        code: '23505',
        constraint: 'outbox_aggregate_type_aggregate_id_aggregate_version_key',
      });
      await assert.rejects(append(db.pool, s, 'o-9', 1, early.eventId), {
        code: '23505',
        constraint: 'outbox_event_id_key',
      });
      await waitFor(() => seen.has(later.eventId) || undefined, 'the event in the new partition to be applied');
      // A large append in one transaction: the trigger holds nothing per row until commit (advisory
      // locks did, and ran PostgreSQL's lock table out at 10,000).
      const bulk = Array.from({ length: 10_000 }, (_, i) => ({
        aggregateType: 'bulk',
        aggregateId: `b-${i}`,
        aggregateVersion: 1,
        eventType: 'Noted',
        payload: {},
      }));
      await withTransaction(db.pool, (tx) => appendManyToOutbox(tx, bulk, { schema: s }));

      // A redelivery of the first event now finds its inbox row in another partition: a duplicate.
      const settled: string[] = [];
      consumer.on('settled', (s) => {
        if (s.action === 'ack' && s.outcome === 'duplicate') settled.push(s.eventId);
      });
      await fixture.publish([seen.get(early.eventId)!]);
      await waitFor(() => settled.includes(early.eventId) || undefined, 'the redelivery to be settled as a duplicate');
      const counts = await callCounts(db.pool, s);
      assert.deepEqual([...counts.values()], [1, 1, 1], 'each event handled once');
      const inbox = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${s}".inbox WHERE event_id = $1`,
        [early.eventId],
      );
      assert.equal(inbox.rows[0]!.n, 1);
    }));

  it('retention under load drops processed partitions, never one with a pending or failed row, and keeps the inbox for its window', () =>
    withBrokerFixture('cvt_partret', async (fixture) => {
      const { db, queue } = fixture;
      const s = db.schema;
      await db.pool.query(`CREATE TABLE "${s}".calls (event_id text PRIMARY KEY, n int NOT NULL)`);
      await migrate(db.pool, { schema: s, partitioned: { intervalMs: 1_000, ahead: 2 } });
      const seen = new Map<string, EventEnvelope>();
      const consumer = countingConsumer(fixture, seen);
      const relay = fixture.startRelay();
      await consumer.ready({ timeoutMs: 10_000 });
      await relay.ready({ timeoutMs: 10_000 });

      // A failed row, then in the next partition a row the relay may not claim yet (pending, due in an hour).
      const failed = await db.pool.query<{ p: string }>(
        `INSERT INTO "${s}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, last_error)
         VALUES ('held-failed', 'order', 'failed', 1, 'Placed', '{"version":1}', 'failed', 'CONVERGE_TEST')
         RETURNING tableoid::regclass::text AS p`,
      );
      const failedEnds = (await partitions(db.pool, s, 'outbox')).find(
        (p) => p.name === failed.rows[0]!.p.split('.')[1],
      )!.toMs;
      await waitFor(async () => (await databaseNow(db.pool)) >= failedEnds || undefined, 'the next interval');
      const held = await db.pool.query<{ p: string }>(
        `INSERT INTO "${s}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, next_attempt_at)
         VALUES ('held-pending', 'order', 'held', 1, 'Placed', '{"version":1}', now() + interval '1 hour')
         RETURNING tableoid::regclass::text AS p`,
      );
      const heldPartitions = new Set([held.rows[0]!.p, failed.rows[0]!.p].map((p) => p.split('.')[1]!));

      const retention = {
        schema: s,
        outboxRetentionMs: 0,
        inboxRetentionMs: 4_000,
        retryHorizonMs: 1_000,
        quarantineReplayWindowMs: 1_000,
        broker: { amqpUrl: AMQP_URL, queues: [queue], marginMs: 0 },
      };
      const runs: CleanupResult[] = [];
      let producing = true;
      const cleaner = (async () => {
        while (producing) {
          runs.push(await cleanup(db.pool, retention));
          await waitFor(async () => true, 'nothing');
        }
      })();
      const appended: string[] = [];
      const started = Date.now();
      let last = 0;
      while (Date.now() - started < 7_000) {
        last++;
        for (const id of ['a', 'b', 'c', 'd']) appended.push((await append(db.pool, s, id, last)).eventId);
      }
      await waitFor(
        () => appended.every((id) => seen.has(id)) || undefined,
        'every appended event to be applied',
        30_000,
      );
      producing = false;
      await cleaner;

      const dropped = runs.flatMap((run) => run.partitions?.dropped ?? []);
      const kept = runs.flatMap((run) => run.partitions?.kept ?? []);
      assert.ok(
        dropped.filter((p) => p.startsWith('outbox_')).length >= 3,
        `outbox partitions dropped: ${dropped.join(' ')}`,
      );
      assert.ok(
        dropped.some((p) => p.startsWith('inbox_')),
        `inbox partitions dropped: ${dropped.join(' ')}`,
      );
      for (const partition of heldPartitions) {
        assert.ok(!dropped.includes(partition), `${partition} holds a pending or failed row and stays`);
        assert.ok(kept.some((k) => k.partition === partition && k.reason === 'unpublished-rows'));
      }
      const left = await db.pool.query(`SELECT event_id FROM "${s}".outbox WHERE event_id LIKE 'held-%' ORDER BY 1`);
      assert.deepEqual(left.rows, [{ event_id: 'held-failed' }, { event_id: 'held-pending' }]);
      const counts = await callCounts(db.pool, s);
      assert.equal(counts.size, appended.length, 'every event applied');
      assert.ok(
        [...counts.values()].every((n) => n === 1),
        'and each once',
      );

      // Fresh events: their inbox rows are inside the window, so their redeliveries are duplicates.
      const recent: string[] = [];
      for (const id of ['a', 'b', 'c', 'd']) recent.push((await append(db.pool, s, id, last + 1)).eventId);
      await waitFor(() => recent.every((id) => seen.has(id)) || undefined, 'the fresh events to be applied');
      const duplicates = new Set<string>();
      consumer.on('settled', (settlement) => {
        if (settlement.action === 'ack' && settlement.outcome === 'duplicate') duplicates.add(settlement.eventId);
      });
      runs.push(await cleanup(db.pool, retention));
      const age = await db.pool.query<{ ms: number }>(
        `SELECT extract(epoch FROM now() - min(received_at))::float8 * 1000 AS ms FROM "${s}".inbox WHERE event_id = ANY($1)`,
        [recent],
      );
      // Rows this young sit in a partition whose range ends less than the window ago, whatever its alignment.
      assert.ok(
        age.rows[0]!.ms < 4_000 - 1_000,
        `the fresh rows are ${age.rows[0]!.ms} ms old: too slow to test the window`,
      );
      await fixture.publish(recent.map((id) => seen.get(id)!));
      await waitFor(
        () => recent.every((id) => duplicates.has(id)) || undefined,
        'the redeliveries to settle as duplicates',
      );
      assert.ok(
        [...(await callCounts(db.pool, s)).values()].every((n) => n === 1),
        'redeliveries inside the window change nothing',
      );

      // Once the held row is published, its partition goes too.
      await db.pool.query(`UPDATE "${s}".outbox SET next_attempt_at = now() WHERE event_id = 'held-pending'`);
      await waitFor(() => seen.has('held-pending') || undefined, 'the held event to be published and applied');
      const heldPartition = held.rows[0]!.p.split('.')[1]!;
      if (heldPartition !== failed.rows[0]!.p.split('.')[1]) {
        const after = await cleanup(db.pool, retention);
        assert.ok(
          after.partitions?.dropped.includes(heldPartition),
          `${heldPartition} dropped once its row was published`,
        );
      }
    }));

  it('status warns while the partitions reach less than one interval ahead, before inserts fail, and a relay creates them', () =>
    withBrokerFixture('cvt_partgap', async (fixture) => {
      const { db } = fixture;
      const s = db.schema;
      await migrate(db.pool, { schema: s, partitioned: { intervalMs: 2_000, ahead: 1 } });
      const finding = async () => {
        const status = await readPipelineStatus(db.pool, { schema: s, sampleMs: 0 });
        return status.findings.find((f) => f.kind === 'partitions-not-ahead' && f.subject === 'outbox');
      };
      // Between one interval and two ahead when made; which, depends on where in its interval the clock is.
      assert.notEqual((await finding())?.severity, 'stalled', 'freshly made: now is covered');
      const warning = await waitFor(
        async () => (await finding())?.severity === 'warning' && (await finding()),
        'a warning',
      );
      assert.match(warning.evidence, /less than one interval/);
      await append(db.pool, s, 'o-1', 1);
      const stalled = await waitFor(async () => {
        const f = await finding();
        return f?.severity === 'stalled' ? f : undefined;
      }, 'nothing to cover now');
      assert.match(stalled.evidence, /every insert into it fails/);
      await assert.rejects(append(db.pool, s, 'o-1', 2), { code: '23514' });

      // A delivery while the inbox has no partition for now waits as in an outage: never quarantined.
      await db.pool.query(`CREATE TABLE "${s}".calls (event_id text PRIMARY KEY, n int NOT NULL)`);
      const logged: { level: string; fields: Record<string, unknown> }[] = [];
      const record = (level: string) => (fields: object) => void logged.push({ level, fields: { ...fields } });
      const seen = new Map<string, EventEnvelope>();
      const consumer = countingConsumer(fixture, seen, {
        debug: record('debug'),
        info: record('info'),
        warn: record('warn'),
        error: record('error'),
      });
      await consumer.ready({ timeoutMs: 10_000 });
      const waiting = { ...orderEnvelope('o-2', 1), eventId: 'waits-for-a-partition' };
      await fixture.publish([waiting]);
      await waitFor(
        () => logged.some((entry) => entry.fields.code === '23514') || undefined,
        'the consumer to meet the inbox without a partition',
      );
      assert.ok(!logged.some((entry) => entry.level === 'error'), 'logged as an outage, not an error');

      const relay = fixture.startRelay();
      await relay.ready({ timeoutMs: 10_000 });
      await waitFor(
        async () => (await finding()) === undefined || undefined,
        'the relay to create the partitions ahead',
      );
      await append(db.pool, s, 'o-1', 2);
      await waitFor(() => seen.has(waiting.eventId) || undefined, 'the waiting delivery to be applied');
      const quarantined = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${s}".quarantine`);
      assert.equal(quarantined.rows[0]!.n, 0);
    }));
});
