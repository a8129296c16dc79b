// test-files: heavy, starts a PostgreSQL primary and a streaming standby of its own (kit/pg-pair.ts)
/**
 * PostgreSQL failover with libpq's host list: the producer, a polling relay and a consumer all
 * connect with `postgres://…@primary,standby/…?target_session_attrs=read-write`. Mid-run the
 * primary crashes and the standby is promoted; with synchronous replication every transaction
 * whose COMMIT returned is on the new primary, so every such event is published and applied
 * exactly once there, and each aggregate's projection reaches its last committed version.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import {
  appendToOutbox,
  applyIncrement,
  createConverge,
  silentLogger,
  startConsumer,
  startRelay,
  withTransaction,
} from '../../src/index.js';
import { PgPair } from '../../kit/pg-pair.js';
import { AMQP_URL, connectRabbit, dropTestBroker, test, uniqueName, waitFor } from '../support/rig.js';

const AGGREGATES = 8;
const VERSIONS = 25;
const FAIL_AFTER = 60;
const FAST = { initialDelayMs: 50, maxDelayMs: 500 };

/**
 * Appends one event; a failure during the failover leaves it unknown whether the COMMIT took, so
 * the outbox on whichever server now accepts writes says: present means committed.
 */
async function appendUntilCommitted(pool: pg.Pool, schema: string, aggregateId: string, version: number) {
  for (let tries = 0; ; tries++) {
    try {
      return await withTransaction(pool, async (tx) => {
        const done = await tx.query<{ event_id: string }>(
          `SELECT event_id FROM "${schema}".outbox WHERE aggregate_id = $1 AND aggregate_version = $2`,
          [aggregateId, version],
        );
        if (done.rows[0]) return done.rows[0].event_id;
        const appended = await appendToOutbox(
          tx,
          { aggregateType: 'order', aggregateId, aggregateVersion: version, eventType: 'OrderChanged', payload: {} },
          { schema },
        );
        return appended.eventId;
      });
    } catch (err) {
      assert.ok(tries < 600, `the append never went through: ${(err as Error).message}`);
      // The next attempt opens a new connection, which the host list sends to a writable server.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

test('a synchronous standby promoted mid-run: every event whose COMMIT returned is published and applied exactly once on the new primary', async () => {
  const pair = await PgPair.start({ synchronous: true, signals: false });
  const connection = await connectRabbit();
  const exchange = uniqueName('cvt_failover.events');
  const queue = uniqueName('cvt_failover.q');
  const schema = uniqueName('cvt_failover');
  const url = pair.multiHostUrl;
  const converge = createConverge({ connectionString: url, amqpUrl: AMQP_URL, schema, exchange });
  const stops: (() => Promise<void>)[] = [];
  try {
    await pair.waitStreaming();
    await converge.migrate();
    const common = { connectionString: url, amqpUrl: AMQP_URL, schema, exchange, logger: silentLogger };
    const consumer = startConsumer({
      ...common,
      queue,
      reconnectBackoff: FAST,
      handlers: {
        OrderChanged: async (event, { tx }) => {
          await applyIncrement(tx, { projection: 'orders', event, schema }, () => tx.query('SELECT 1'));
        },
      },
    });
    stops.push(() => consumer.stop());
    const relay = startRelay({ ...common, pollIntervalMs: 50, reconnectBackoff: FAST, backoff: FAST });
    stops.unshift(() => relay.stop());
    await consumer.ready({ timeoutMs: 30_000 });
    await relay.ready({ timeoutMs: 30_000 });

    const committed: string[] = [];
    let failedOver = false;
    for (let version = 1; version <= VERSIONS; version++)
      for (let a = 0; a < AGGREGATES; a++) {
        committed.push(await appendUntilCommitted(converge.pool, schema, `o${a}`, version));
        if (committed.length === FAIL_AFTER && !failedOver) {
          failedOver = true;
          await pair.failPrimary('immediate');
          await pair.promoteStandby();
        }
      }

    const total = AGGREGATES * VERSIONS;
    const state = async () => {
      const { rows } = await converge.pool.query<{ published: number; inbox: number; at_last: number }>(
        `SELECT (SELECT count(*)::int FROM "${schema}".outbox WHERE status = 'published') AS published,
                (SELECT count(*)::int FROM "${schema}".inbox) AS inbox,
                (SELECT count(*)::int FROM "${schema}".projection_state WHERE projection = 'orders' AND version = ${VERSIONS}) AS at_last`,
      );
      return rows[0]!;
    };
    await waitFor(
      async () => {
        const now = await state().catch(() => undefined);
        return now !== undefined && now.inbox === total && now.published === total && now.at_last === AGGREGATES;
      },
      `all ${total} events published and applied on the promoted standby`,
      90_000,
    );
    const { rows } = await converge.pool.query<{ event_id: string; port: number }>(
      `SELECT o.event_id, inet_server_port() AS port FROM "${schema}".outbox o
         JOIN "${schema}".inbox i USING (event_id) ORDER BY o.position`,
    );
    assert.equal(rows[0]?.port, pair.ports.standby, 'the pool writes on the promoted standby');
    assert.deepEqual(
      rows.map((row) => row.event_id).sort(),
      [...committed].sort(),
      'every committed event is in the outbox and the inbox, once',
    );
  } finally {
    for (const stop of stops) await stop().catch(() => undefined);
    await converge.close().catch(() => undefined);
    await dropTestBroker(connection, [queue, exchange]).catch(() => undefined);
    await connection.close().catch(() => undefined);
    await pair.stop();
  }
});
