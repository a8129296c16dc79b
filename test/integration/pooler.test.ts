// test-files: session, drives PgBouncer itself and needs DATABASE_URL to be PostgreSQL itself (its direct connection)
/**
 * converge behind PgBouncer in transaction mode (kit/pgbouncer.ts, started by `npm run services`):
 * each transaction may run on another server connection, so nothing may stay on one between
 * transactions. Named prepared statements break there (shown first, on the real pooler), and
 * poolMode 'transaction' keeps converge off them; LISTEN and claim exclusive's lock live on
 * directConnectionString, or the relay polls and exclusive is refused.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import pg from 'pg';
import {
  appendToOutbox,
  applyIncrement,
  createConverge,
  startRelay,
  withoutPreparedStatements,
  withTransaction,
  type Executor,
} from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { POOLER_DATABASE_URL } from '../../kit/pgbouncer.js';
import { withBrokerFixture } from '../support/broker-fixture.js';
import { capturingLogger } from '../support/consumer-env.js';
import { afterEach, before, DATABASE_URL, describe, redactUrl, registry, test, waitFor } from '../support/rig.js';

const POOLER_HINT = 'run `npm run services` (starts PgBouncer in transaction mode on 6432), or set POOLER_DATABASE_URL';

const opened: pg.Pool[] = [];

/** A pool through the pooler, ended after the test (its relays and consumers stop first, with the fixture). */
function poolerPool(max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: POOLER_DATABASE_URL, max, connectionTimeoutMillis: 5000 });
  pool.on('error', () => undefined);
  registry.pool(pool);
  opened.push(pool);
  return pool;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((pool) => pool.end()));
});

before(async () => {
  const client = new pg.Client({ connectionString: POOLER_DATABASE_URL, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(
      `PgBouncer is not reachable at ${redactUrl(POOLER_DATABASE_URL)} (${(err as Error).message}); ${POOLER_HINT}`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
});

const backendPid = async (client: pg.PoolClient) =>
  (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

const orderEvent = (aggregateId: string, version: number) => ({
  aggregateType: 'order',
  aggregateId,
  aggregateVersion: version,
  eventType: 'OrderChanged',
  payload: { version },
});

/**
 * Appends on `writer` in a transaction, then runs the next append on `writer` while `blocker` holds
 * the server connection the first one ran on: PgBouncer must hand `writer` another one.
 */
async function appendOnAnotherServerConnection(
  writer: pg.PoolClient,
  blocker: pg.PoolClient,
  schema: string,
  aggregateId: string,
): Promise<{ first: number; second: number }> {
  await writer.query('BEGIN');
  const first = await backendPid(writer);
  await appendToOutbox(writer, orderEvent(aggregateId, 1), { schema });
  await writer.query('COMMIT');
  // PgBouncer hands out the server connection released last first; a few tries cover a busy pooler.
  await blocker.query('BEGIN');
  for (let tries = 0; (await backendPid(blocker)) !== first; tries++) {
    assert.ok(tries < 50, 'the blocker never got the server connection the writer used');
    await blocker.query('COMMIT');
    await blocker.query('BEGIN');
  }
  try {
    await writer.query('BEGIN');
    const second = await backendPid(writer);
    try {
      await appendToOutbox(writer, orderEvent(aggregateId, 2), { schema });
      await writer.query('COMMIT');
    } catch (err) {
      await writer.query('ROLLBACK');
      throw err;
    }
    return { first, second };
  } finally {
    await blocker.query('COMMIT');
  }
}

describe('behind PgBouncer in transaction mode', () => {
  test('a statement prepared by name on one server connection is missing on the next; withoutPreparedStatements keeps converge on plain text', () =>
    withBrokerFixture('cvt_pooler', async ({ db }) => {
      const named = poolerPool(2);
      const [writer, blocker] = [await named.connect(), await named.connect()];
      try {
        await assert.rejects(
          appendOnAnotherServerConnection(writer, blocker, db.schema, 'named'),
          (err: { code?: string }) => err.code === '26000',
          'the second append reached a server connection that never saw the statement',
        );
      } finally {
        writer.release();
        blocker.release();
      }

      const plain = poolerPool(2);
      withoutPreparedStatements(plain);
      const [writer2, blocker2] = [await plain.connect(), await plain.connect()];
      try {
        const { first, second } = await appendOnAnotherServerConnection(writer2, blocker2, db.schema, 'plain');
        assert.notEqual(second, first, 'the second append ran on another server connection');
      } finally {
        writer2.release();
        blocker2.release();
      }
      const { rows } = await db.pool.query<{ n: string }>(
        `SELECT aggregate_id || '@' || aggregate_version AS n FROM "${db.schema}".outbox ORDER BY 1`,
      );
      assert.deepEqual(
        rows.map((row) => row.n),
        ['named@1', 'plain@1', 'plain@2'],
        'the failed append rolled back; the plain-text appends committed',
      );
    }));

  test('producer, two lease relays and a consumer with poolMode transaction: every event applied once, in order; the relays poll', () =>
    withBrokerFixture('cvt_pooler', async ({ db, startConsumer, startRelay: startFixtureRelay }) => {
      const aggregates = 20;
      const versions = 15;
      const pool = poolerPool(8);
      withoutPreparedStatements(pool);
      const seen = new Map<string, number>();
      const outOfOrder: string[] = [];
      const consumer = startConsumer({
        pool,
        poolMode: 'transaction',
        handlers: {
          OrderChanged: async (event, { tx }) => {
            await applyIncrement(tx, { projection: 'orders', event, schema: db.schema }, () => tx.query('SELECT 1'));
            const last = seen.get(event.aggregateId) ?? 0;
            if (event.aggregateVersion !== last + 1) outOfOrder.push(`${event.aggregateId}@${event.aggregateVersion}`);
            seen.set(event.aggregateId, event.aggregateVersion);
          },
        },
      });
      const logs = capturingLogger();
      for (const relayId of ['pooled-a', 'pooled-b'])
        startFixtureRelay({
          pool: undefined,
          connectionString: POOLER_DATABASE_URL,
          poolMode: 'transaction',
          relayId,
          logger: logs,
        });
      await consumer.ready({ timeoutMs: 10_000 });
      for (let version = 1; version <= versions; version++)
        await withTransaction(pool, async (tx) => {
          for (let a = 0; a < aggregates; a++)
            await appendToOutbox(tx, orderEvent(`o${a}`, version), { schema: db.schema });
        });
      const total = aggregates * versions;
      await waitFor(() => consumer.stats.applied === total, `${total} events applied`, 60_000);
      assert.deepEqual(outOfOrder, [], 'each aggregate saw its versions in order');
      const { rows } = await db.pool.query<{ versions: number; inbox: number; pending: number }>(
        `SELECT (SELECT count(*)::int FROM "${db.schema}".projection_state WHERE projection = 'orders' AND version = ${versions}) AS versions,
                (SELECT count(*)::int FROM "${db.schema}".inbox) AS inbox,
                (SELECT count(*)::int FROM "${db.schema}".outbox WHERE status <> 'published') AS pending`,
      );
      assert.deepEqual(rows[0], { versions: aggregates, inbox: total, pending: 0 });
      assert.equal(
        logs.records.filter((record) => record.includes('LISTEN needs a session')).length,
        2,
        'each relay said it polls',
      );
    }));

  test('with directConnectionString the relay listens there: an append wakes it long before its 60 s poll', () =>
    withBrokerFixture('cvt_pooler', async ({ db, startConsumer, startRelay: startFixtureRelay }) => {
      const pool = poolerPool(2);
      withoutPreparedStatements(pool);
      const consumer = startConsumer({ pool, poolMode: 'transaction', handlers: { '*': async () => undefined } });
      const relay = startFixtureRelay({
        pool,
        poolMode: 'transaction',
        directConnectionString: DATABASE_URL,
        pollIntervalMs: 60_000,
      });
      const idle = once(relay, 'idle');
      await consumer.ready({ timeoutMs: 10_000 });
      // The first cycle (which starts LISTEN before it claims) finds nothing and sleeps out its poll, unless NOTIFY reaches it.
      await idle;
      await withTransaction(pool, (tx: Executor) => appendToOutbox(tx, orderEvent('w-1', 1), { schema: db.schema }));
      await waitFor(() => consumer.stats.applied === 1, 'the event applied after a NOTIFY', 15_000);
    }));

  test('claim exclusive: refused without directConnectionString; with it, one relay publishes and the other stands by', () =>
    withBrokerFixture('cvt_pooler', async ({ db, relayOptions, startConsumer, startRelay: startFixtureRelay }) => {
      assert.throws(
        () =>
          startRelay(
            relayOptions({
              pool: undefined,
              connectionString: POOLER_DATABASE_URL,
              poolMode: 'transaction',
              claim: 'exclusive',
            }),
          ),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.problems.some((p) => p.path === 'claim' && /directConnectionString/.test(p.message)),
      );
      const pool = poolerPool(4);
      withoutPreparedStatements(pool);
      const consumer = startConsumer({ pool, poolMode: 'transaction', handlers: { '*': async () => undefined } });
      const exclusive = {
        pool,
        poolMode: 'transaction' as const,
        directConnectionString: DATABASE_URL,
        claim: 'exclusive' as const,
      };
      await once(startFixtureRelay({ ...exclusive, relayId: 'excl-a' }), 'active');
      const second = startFixtureRelay({ ...exclusive, relayId: 'excl-b' });
      const turns: string[] = [];
      second.on('active', () => turns.push('active'));
      second.on('standby', () => turns.push('standby'));
      await waitFor(() => turns.length > 0, 'the second relay decided');
      await withTransaction(pool, async (tx) => {
        for (let version = 1; version <= 50; version++)
          await appendToOutbox(tx, orderEvent('x-1', version), { schema: db.schema });
      });
      await waitFor(() => consumer.stats.applied === 50, '50 events applied', 30_000);
      assert.deepEqual(turns, ['standby'], 'the second relay stood by while the owner lived');
    }));

  test('createConverge with poolMode transaction refuses the CDC relay, whose replication stream no pooler carries', async () => {
    const converge = createConverge({
      connectionString: POOLER_DATABASE_URL,
      poolMode: 'transaction',
      amqpUrl: 'amqp://127.0.0.1',
    });
    try {
      assert.throws(
        () => converge.startCdcRelay({}),
        (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.path === 'poolMode'),
      );
    } finally {
      await converge.close();
    }
  });
});
