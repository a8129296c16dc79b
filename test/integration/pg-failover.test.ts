// test-files: heavy, starts a PostgreSQL primary and a streaming standby of its own (kit/pg-pair.ts)
/**
 * PostgreSQL failover with libpq's host list: the producer, a polling relay and a consumer all
 * connect with `postgres://…@primary,standby/…?target_session_attrs=read-write`, and the primary
 * crashes mid-run for a promoted standby. Synchronous: every transaction whose COMMIT returned is on
 * the new primary, so every such event is published and applied exactly once there. Asynchronous:
 * what only the old primary had is lost, and what the reconciler says about it is checked.
 */
import assert from 'node:assert/strict';
import pg from 'pg';
import {
  appendToOutbox,
  applyIncrement,
  createConverge,
  rebuildProjection,
  reconcile,
  silentLogger,
  startConsumer,
  startRelay,
  withTransaction,
  type ReconcileRow,
} from '../../src/index.js';
import { listQuarantine, replayQuarantined } from '../../src/ops/index.js';
import { PgPair } from '../../kit/pg-pair.js';
import { appendUntilCommitted, FAST_BACKOFF } from '../support/failover.js';
import {
  AMQP_URL,
  connectRabbit,
  dropTestBroker,
  openConfirmPublisher,
  test,
  uniqueName,
  waitFor,
} from '../support/rig.js';

const AGGREGATES = 8;
const VERSIONS = 25;
const FAIL_AFTER = 60;
const FAST = FAST_BACKOFF;

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

test('an asynchronous standby promoted after it stopped receiving WAL: what only the old primary had is gone, reconcile reports the projections its published events reached as ahead, a successor waits in quarantine, and a rebuild makes source and projection agree', async () => {
  const pair = await PgPair.start({ synchronous: false, signals: false });
  const connection = await connectRabbit();
  const exchange = uniqueName('cvt_asyncfail.events');
  const queue = uniqueName('cvt_asyncfail.q');
  const schema = uniqueName('cvt_asyncfail');
  const url = pair.multiHostUrl;
  const converge = createConverge({ connectionString: url, amqpUrl: AMQP_URL, schema, exchange });
  const publisher = await openConfirmPublisher(connection);
  const running = new Set<{ stop(): Promise<void> }>();
  const q = `"${schema}"`;
  try {
    await pair.waitStreaming();
    await converge.migrate();
    await converge.pool.query(
      `CREATE TABLE ${q}.orders (id text PRIMARY KEY, version int NOT NULL, total int NOT NULL);
       CREATE TABLE ${q}.order_view (id text PRIMARY KEY, total int NOT NULL)`,
    );
    // The business change and its event in one transaction: the order's version is the event's.
    const order = (id: string, delta: number) =>
      withTransaction(converge.pool, async (tx) => {
        const { rows } = await tx.query<{ version: number }>(
          `INSERT INTO ${q}.orders AS o (id, version, total) VALUES ($1, 1, $2)
             ON CONFLICT (id) DO UPDATE SET version = o.version + 1, total = o.total + $2 RETURNING version`,
          [id, delta],
        );
        const event = {
          aggregateType: 'order',
          aggregateId: id,
          aggregateVersion: rows[0]!.version,
          eventType: 'Added',
          payload: { delta },
        };
        return (await appendToOutbox(tx, event, { schema })).eventId;
      });
    const common = { connectionString: url, amqpUrl: AMQP_URL, schema, exchange, logger: silentLogger };
    const consume = () => {
      const consumer = startConsumer({
        ...common,
        queue,
        reconnectBackoff: FAST,
        handlers: {
          Added: async (event, { tx }) => {
            const { delta } = event.payload as { delta: number };
            await applyIncrement(tx, { projection: 'order_view', event, schema }, () =>
              tx.query(
                `INSERT INTO ${q}.order_view AS v (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = v.total + $2`,
                [event.aggregateId, delta],
              ),
            );
          },
        },
      });
      running.add(consumer);
      return consumer;
    };
    const relay = startRelay({ ...common, pollIntervalMs: 50, reconnectBackoff: FAST, backoff: FAST });
    running.add(relay);
    const before = consume();
    await before.ready({ timeoutMs: 30_000 });
    for (let round = 0; round < 3; round++) for (const id of ['o0', 'o1', 'o2', 'o3']) await order(id, 10);
    await waitFor(() => before.stats.applied === 12, 'the first 12 events applied');
    await before.stop();
    running.delete(before);

    // From here the primary's commits exist only there; its relay still publishes them.
    await pair.cutReplication();
    for (const id of ['o0', 'o1']) for (let round = 0; round < 2; round++) await order(id, 100);
    const primaryOnly = new pg.Pool({ connectionString: pair.primaryUrl, max: 1 });
    try {
      await waitFor(async () => {
        const { rows } = await primaryOnly.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${q}.outbox WHERE status = 'published'`,
        );
        return rows[0]!.n === 16;
      }, 'the 4 events only the primary has published to the broker');
    } finally {
      await primaryOnly.end();
    }
    await pair.failPrimary('immediate');
    await pair.promoteStandby();

    const after = consume();
    await waitFor(() => after.stats.applied === 4, 'the 4 lost events applied from the broker on the new primary');
    const { rows: source } = await converge.pool.query<{ n: number; top: number }>(
      `SELECT count(*)::int AS n, max(version) AS top FROM ${q}.orders`,
    );
    assert.deepEqual(source[0], { n: 4, top: 3 }, 'the new primary has the source as of the last replicated commit');
    // A new change of o0 takes version 4 again: its event finds the projection at 5 and waits for a person.
    await order('o0', 1);
    await waitFor(() => after.stats.quarantined === 1, 'the successor quarantined as stale');
    const quarantined = await listQuarantine(converge.pool, { schema });
    assert.deepEqual(
      quarantined.map((row) => row.reason),
      ['stale-version'],
    );

    const sourcePage = async (after: string | null, limit: number): Promise<ReconcileRow[]> => {
      const { rows } = await converge.pool.query<{ id: string; version: number; total: number }>(
        `SELECT id, version, total FROM ${q}.orders WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
        [after ?? '', limit],
      );
      return rows.map((row) => ({ id: row.id, version: row.version, fields: { total: row.total } }));
    };
    const report = await reconcile(converge.pool, {
      schema,
      projection: 'order_view',
      aggregateType: 'order',
      source: sourcePage,
    });
    assert.equal(report.differences.ahead, 2, 'o0 and o1 are ahead of their source');
    assert.deepEqual([...report.samples.ahead].sort(), ['o0', 'o1']);

    await after.stop();
    running.delete(after);
    await rebuildProjection(converge.pool, {
      schema,
      projection: 'order_view',
      aggregateType: 'order',
      source: sourcePage,
      reset: async (tx) => void (await tx.query(`TRUNCATE ${q}.order_view`)),
      apply: async (tx, row) =>
        void (await tx.query(`INSERT INTO ${q}.order_view (id, total) VALUES ($1, $2)`, [row.id, row.fields?.total])),
    });
    const again = await reconcile(converge.pool, {
      schema,
      projection: 'order_view',
      aggregateType: 'order',
      source: sourcePage,
    });
    assert.deepEqual(again.differences, { missing: 0, stale: 0, ahead: 0, mismatch: 0, extra: 0 });
    const { rows: agree } = await converge.pool.query<{ differ: number }>(
      `SELECT count(*)::int AS differ FROM ${q}.orders o FULL JOIN ${q}.order_view v USING (id) WHERE o.total IS DISTINCT FROM v.total`,
    );
    assert.equal(agree[0]!.differ, 0, 'every order total equals its view');
    // The quarantined successor is covered by the rebuilt baseline (o0 at version 4): replayed, it changes nothing.
    const last = consume();
    await last.ready({ timeoutMs: 30_000 });
    await replayQuarantined(converge.pool, publisher, { id: quarantined[0]!.id, queue, schema });
    await waitFor(
      () => last.stats.duplicate + last.stats.applied + last.stats.ignored >= 1,
      'the replayed successor settled',
    );
    const { rows: still } = await converge.pool.query<{ differ: number }>(
      `SELECT count(*)::int AS differ FROM ${q}.orders o FULL JOIN ${q}.order_view v USING (id) WHERE o.total IS DISTINCT FROM v.total`,
    );
    assert.equal(still[0]!.differ, 0, 'the replay applied nothing twice');
  } finally {
    for (const component of running) await component.stop().catch(() => undefined);
    await converge.close().catch(() => undefined);
    await dropTestBroker(connection, [queue, exchange]).catch(() => undefined);
    await connection.close().catch(() => undefined);
    await pair.stop();
  }
});
