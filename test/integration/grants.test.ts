import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type amqp from 'amqplib';
import {
  Consumer,
  Relay,
  appendToOutbox,
  applyIncrement,
  grantsSql,
  migrate,
  performEffect,
  silentLogger,
  withTransaction,
} from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { encodeMessage, routingKeyFromTemplate } from '../../src/transport/wire.js';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import {
  after,
  before,
  describe,
  test,
  connectPostgres,
  connectRabbit,
  uniqueName,
  waitFor,
  dropTestBroker,
  AMQP_URL,
} from '../support/rig.js';
import { urlAs } from '../support/database-url.js';

describe('grantsSql', () => {
  test('quotes every name and grants only what each component runs', () => {
    const sql = grantsSql({
      schema: 'conv',
      relayRole: 'r',
      consumerRoles: ['c1', 'c2'],
      producerRole: 'p',
      projectionTables: ['app.totals'],
    });
    assert.match(sql, /GRANT SELECT, UPDATE ON "conv"\.outbox TO "r";/);
    assert.match(sql, /GRANT INSERT ON "conv"\.outbox TO "p";/);
    assert.match(sql, /GRANT SELECT \(position, event_id\) ON "conv"\.outbox TO "p";/);
    assert.match(sql, /GRANT SELECT, INSERT, UPDATE, DELETE ON "app"\."totals" TO "c2";/);
    assert.doesNotMatch(sql, /TRUNCATE|GRANT ALL|migrations/);
    // The relay's only table is the outbox.
    const relayLines = sql.split('\n').filter((line) => line.endsWith(' TO "r";'));
    assert.deepEqual(relayLines, [
      'GRANT USAGE ON SCHEMA "conv" TO "r";',
      'GRANT SELECT, UPDATE ON "conv".outbox TO "r";',
    ]);
  });

  test('a malicious role, schema or table name is a ConfigError naming the field', () => {
    const cases: [string, Parameters<typeof grantsSql>[0]][] = [
      ['schema', { schema: 'x"; DROP TABLE y; --', relayRole: 'r' }],
      ['relayRole', { relayRole: 'r"; DROP ROLE postgres; --' }],
      ['consumerRoles.1', { consumerRoles: ['ok', 'Bad Role'] }],
      ['producerRole', { producerRole: '' }],
      ['projectionTables.0', { consumerRole: 'c', projectionTables: ['app.totals; DROP TABLE x'] }],
      ['projectionTables.0', { consumerRole: 'c', projectionTables: ['totals'] }],
    ];
    for (const [field, options] of cases) {
      assert.throws(
        () => grantsSql(options),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, String(err));
          assert.equal(err.field, field);
          return true;
        },
      );
    }
  });
});

/** The suite's server and database, logged in as `role`. */
const roleUrl = (role: string) => urlAs(role);

/** Runs `sql` as `role` on its own connection and returns the SQLSTATE it failed with, or 'ok'. */
async function sqlstateAs(role: string, sql: string): Promise<string> {
  const client = new pg.Client({ connectionString: roleUrl(role) });
  await client.connect();
  try {
    await client.query(sql);
    return 'ok';
  } catch (err) {
    return String((err as { code?: string }).code);
  } finally {
    await client.end();
  }
}

describe('least-privilege roles against PostgreSQL and RabbitMQ', () => {
  const schema = uniqueName('cvt_grants');
  const biz = `${schema}_biz`;
  const roles = {
    migrator: `${schema}_migrator`,
    relay: `${schema}_relay`,
    consumer: `${schema}_consumer`,
    producer: `${schema}_producer`,
  };
  const exchange = uniqueName('cvt.grants');
  const queue = uniqueName('cvt.grants.q');
  let admin: pg.Pool;
  let rabbit: amqp.ChannelModel;
  let channel: amqp.ConfirmChannel;
  const pools: pg.Pool[] = [];

  const rolePool = (role: string) => {
    const pool = new pg.Pool({ connectionString: roleUrl(role), max: 6 });
    pool.on('error', () => undefined);
    pools.push(pool);
    return pool;
  };

  before(async () => {
    admin = await connectPostgres();
    for (const role of Object.values(roles)) await admin.query(`CREATE ROLE "${role}" LOGIN`);
    // A DBA creates the schema for the migration role, which then needs no CREATE on the database.
    await admin.query(`CREATE SCHEMA "${schema}" AUTHORIZATION "${roles.migrator}"`);
    await admin.query(`CREATE SCHEMA "${biz}"`);
    await admin.query(`CREATE TABLE "${biz}".orders (id text PRIMARY KEY, total bigint NOT NULL)`);
    await admin.query(`CREATE TABLE "${biz}".order_totals (id text PRIMARY KEY, total bigint NOT NULL)`);
    // The application's own grants: the producer writes its business table.
    await admin.query(`GRANT USAGE ON SCHEMA "${biz}" TO "${roles.producer}"`);
    await admin.query(`GRANT SELECT, INSERT, UPDATE ON "${biz}".orders TO "${roles.producer}"`);
    rabbit = await connectRabbit();
    rabbit.on('error', () => undefined);
    channel = await rabbit.createConfirmChannel();
    await channel.assertExchange(exchange, 'topic', { durable: true });
  });

  after(async () => {
    for (const pool of pools) await pool.end().catch(() => undefined);
    await dropTestBroker(rabbit, [queue, exchange]);
    await rabbit.close().catch(() => undefined);
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.query(`DROP SCHEMA IF EXISTS "${biz}" CASCADE`);
    for (const role of Object.values(roles)) {
      await admin.query(`DROP OWNED BY "${role}"`).catch(() => undefined);
      await admin.query(`DROP ROLE IF EXISTS "${role}"`);
    }
    const { rows } = await admin.query(`SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])`, [
      Object.values(roles),
    ]);
    assert.deepEqual(rows, [], 'every test role is dropped again');
    await admin.end();
  });

  test('migrate as the migration role, then relay, consumer and producer each work with only their grants', async () => {
    const migrated = await migrate(roleUrl(roles.migrator), { schema });
    assert.ok(migrated.applied.length > 0);

    // The owner applies the grants on converge's tables; the projection table's owner (here the superuser) grants that one.
    const owner = new pg.Client({ connectionString: roleUrl(roles.migrator) });
    await owner.connect();
    await owner.query(
      grantsSql({ schema, relayRole: roles.relay, consumerRole: roles.consumer, producerRole: roles.producer }),
    );
    await owner.end();
    await admin.query(grantsSql({ schema, consumerRole: roles.consumer, projectionTables: [`${biz}.order_totals`] }));

    const consumer = new Consumer({
      amqpUrl: AMQP_URL,
      queue,
      exchange,
      pool: rolePool(roles.consumer),
      schema,
      logger: silentLogger,
      backoff: { initialDelayMs: 10, maxDelayMs: 50 },
      reconnectBackoff: { initialDelayMs: 10, maxDelayMs: 50 },
      rampUp: false,
      handlers: {
        AmountAdded: async (event, { tx }) => {
          await applyIncrement(tx, { projection: 'order_totals', event, schema }, async () => {
            const amount = (event.payload as { amount: number }).amount;
            return tx.query(
              `INSERT INTO "${biz}".order_totals (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = order_totals.total + EXCLUDED.total`,
              [event.aggregateId, amount],
            );
          });
        },
      },
    });
    const errors: Error[] = [];
    consumer.on('error', (err) => errors.push(err));
    consumer.start();
    const relay = new Relay({
      amqpUrl: AMQP_URL,
      pool: rolePool(roles.relay),
      schema,
      exchange,
      logger: silentLogger,
      pollIntervalMs: 20,
    });
    relay.on('error', (err) => errors.push(err));
    try {
      await consumer.ready();
      relay.start();
      const producer = rolePool(roles.producer);
      const orderId = randomUUID();
      const addAmount = (version: number, amount: number) =>
        withTransaction(producer, async (tx) => {
          if (version === 1)
            await tx.query(`INSERT INTO "${biz}".orders (id, total) VALUES ($1, $2)`, [orderId, amount]);
          else await tx.query(`UPDATE "${biz}".orders SET total = total + $2 WHERE id = $1`, [orderId, amount]);
          await appendToOutbox(
            tx,
            {
              aggregateType: 'order',
              aggregateId: orderId,
              aggregateVersion: version,
              eventType: 'AmountAdded',
              payload: { amount },
            },
            { schema },
          );
        });

      await addAmount(1, 10);
      await waitFor(
        async () => (await admin.query(`SELECT 1 FROM "${schema}".outbox WHERE status = 'published'`)).rowCount === 1,
        'the relay role publishing version 1',
      );
      await waitFor(async () => consumer.stats.applied === 1, 'the consumer role applying version 1');

      // Version 3 arrives before version 2: the consumer role parks it in the reorder buffer.
      const early: EventEnvelope = {
        eventId: randomUUID(),
        aggregateType: 'order',
        aggregateId: orderId,
        aggregateVersion: 3,
        eventType: 'AmountAdded',
        schemaVersion: 1,
        kind: 'incremental',
        payload: { amount: 300 },
        occurredAt: new Date().toISOString(),
      };
      const message = encodeMessage(early, routingKeyFromTemplate('{aggregateType}.{eventType}'));
      channel.publish(exchange, message.routingKey, message.content, message.options);
      await channel.waitForConfirms();
      await waitFor(
        async () =>
          (await admin.query(`SELECT 1 FROM "${schema}".parked WHERE event_id = $1`, [early.eventId])).rowCount === 1,
        'version 3 parked',
      );

      // Version 2 through the outbox: applied, and version 3 drains from the buffer.
      await addAmount(2, 20);
      await waitFor(
        async () =>
          (await admin.query<{ total: string }>(`SELECT total FROM "${biz}".order_totals WHERE id = $1`, [orderId]))
            .rows[0]?.total === '330',
        'versions 2 and 3 applied',
      );
      assert.equal((await admin.query(`SELECT 1 FROM "${schema}".parked`)).rowCount, 0, 'the buffer was drained');
      const state = await admin.query<{ version: string }>(
        `SELECT version FROM "${schema}".projection_state WHERE projection = 'order_totals' AND aggregate_id = $1`,
        [orderId],
      );
      assert.equal(state.rows[0]?.version, '3');

      // A message that is not an envelope: the consumer role writes the quarantine row.
      channel.publish(exchange, 'order.AmountAdded', Buffer.from('not json'), {
        persistent: true,
        messageId: randomUUID(),
      });
      await channel.waitForConfirms();
      await waitFor(
        async () =>
          (await admin.query(`SELECT 1 FROM "${schema}".quarantine WHERE consumer = $1`, [queue])).rowCount === 1,
        'the bad message quarantined',
      );
      assert.equal(
        (await admin.query<{ total: string }>(`SELECT total FROM "${biz}".orders WHERE id = $1`, [orderId])).rows[0]
          ?.total,
        '30',
      );
    } finally {
      await relay.stop();
      await consumer.stop();
    }
    assert.deepEqual(errors.map(String), [], 'no permission errors on the way');
  });

  test('the consumer role records a remote effect with performEffect (the effects table)', async () => {
    const pool = rolePool(roles.consumer);
    const event = { eventId: randomUUID() };
    let calls = 0;
    const outcome = await performEffect(pool, {
      schema,
      event,
      effect: 'send-sms',
      call: (key) => {
        calls++;
        return Promise.resolve({ key });
      },
    });
    assert.equal(outcome.status, 'completed');
    assert.equal(calls, 1);
    const again = await performEffect(pool, { schema, event, effect: 'send-sms', call: () => Promise.resolve({}) });
    assert.equal(again.calledNow, false, 'a completed key is read back, not called again');
    assert.equal(calls, 1);
  });

  test('each role is refused what it was not granted (SQLSTATE 42501)', async () => {
    assert.equal(
      await sqlstateAs(roles.relay, `SELECT * FROM "${biz}".orders`),
      '42501',
      'relay reads a business table',
    );
    assert.equal(await sqlstateAs(roles.relay, `SELECT * FROM "${schema}".inbox`), '42501', 'relay reads the inbox');
    assert.equal(await sqlstateAs(roles.relay, `DELETE FROM "${schema}".outbox`), '42501', 'relay deletes outbox rows');
    assert.equal(
      await sqlstateAs(roles.relay, `SELECT * FROM "${schema}".projection_state`),
      '42501',
      'relay reads projection state',
    );
    assert.equal(
      await sqlstateAs(roles.consumer, `UPDATE "${schema}".outbox SET status = 'pending'`),
      '42501',
      'consumer updates the outbox',
    );
    assert.equal(
      await sqlstateAs(roles.consumer, `SELECT * FROM "${biz}".orders`),
      '42501',
      'consumer reads the business table',
    );
    assert.equal(
      await sqlstateAs(roles.consumer, `DELETE FROM "${schema}".inbox`),
      '42501',
      'consumer deletes inbox rows',
    );
    assert.equal(
      await sqlstateAs(roles.producer, `SELECT payload FROM "${schema}".outbox`),
      '42501',
      'producer reads payloads back',
    );
    assert.equal(
      await sqlstateAs(roles.producer, `UPDATE "${schema}".outbox SET status = 'published'`),
      '42501',
      'producer marks events published',
    );
    assert.equal(
      await sqlstateAs(roles.consumer, `SELECT * FROM "${schema}".migrations`),
      '42501',
      'consumer reads migrations',
    );
  });
});
