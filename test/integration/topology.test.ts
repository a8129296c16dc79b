import assert from 'node:assert/strict';
import { DEFAULT_RETRY_TIERS_MS, retryTierQueueName } from '../../src/transport/queue-arguments.js';
import type amqp from 'amqplib';
import {
  Relay,
  appendManyToOutbox,
  applyIncrement,
  declarePartitionedTopology,
  silentLogger,
  startPartitionedConsumers,
  withTransaction,
  type Consumer,
  type EventHandler,
} from '../../src/index.js';
import { BrokerPluginMissingError } from '../../src/errors.js';
import { encodeMessage, parseEnvelope, routingKeyFromTemplate } from '../../src/internal/index.js';
import { probeExchangeType } from '../../src/transport/topology.js';
import {
  describe,
  test,
  connectRabbit,
  createTestSchema,
  uniqueName,
  waitFor,
  dropBrokerNames,
  AMQP_URL,
} from '../support/rig.js';

/** A missing consistent-hash plugin fails here with BrokerPluginMissingError, which names the command. */
function declare(
  channel: amqp.Channel,
  exchange: string,
  queuePrefix: string,
  partitions: number,
  queueType: 'quorum' | 'classic' = 'quorum',
) {
  return declarePartitionedTopology(channel, { exchange, queuePrefix, partitions, queueType });
}

async function removeTopology(
  connection: amqp.ChannelModel,
  exchange: string,
  hashExchange: string,
  queues: string[],
): Promise<void> {
  // Partition queues are named from a prefix, not by the rig, so they go now even under CONVERGE_KEEP_FAILED.
  await dropBrokerNames(connection, [...queues, hashExchange, exchange]);
}

describe('partitioned topology', () => {
  test('routes every event of one aggregate to the same partition and spreads aggregates over all partitions', async () => {
    const connection = await connectRabbit();
    const exchange = uniqueName('cvt.topo.x');
    const prefix = uniqueName('cvt.topo');
    const channel = await connection.createConfirmChannel();
    // basic.get, used here to look inside the partitions, needs classic queues.
    const { hashExchange, queues, retryTiers } = await declare(channel, exchange, prefix, 3, 'classic');
    try {
      // Every partition has its retry tiers, each dead-lettering back into it after its delay.
      assert.deepEqual(
        retryTiers.map((tiers) => tiers.map((t) => t.delayMs)),
        queues.map(() => [...DEFAULT_RETRY_TIERS_MS]),
      );
      for (const [p, queue] of queues.entries())
        for (const tier of retryTiers[p]!) {
          assert.equal(tier.queue, retryTierQueueName(queue, tier.delayMs));
          const check = await connection.createChannel();
          await check.assertQueue(tier.queue, {
            durable: true,
            arguments: {
              'x-dead-letter-exchange': '',
              'x-dead-letter-routing-key': queue,
              'x-message-ttl': tier.delayMs,
            },
          });
          await check.close();
        }
      const key = routingKeyFromTemplate('{aggregateType}.{eventType}');
      for (let version = 1; version <= 3; version++) {
        for (let id = 0; id < 60; id++) {
          const message = encodeMessage(
            {
              eventId: `e${id}-${version}`,
              aggregateType: 'order',
              aggregateId: `agg-${id}`,
              aggregateVersion: version,
              eventType: 'AmountAdded',
              schemaVersion: 1,
              kind: 'incremental',
              payload: {},
              occurredAt: new Date().toISOString(),
            },
            key,
          );
          channel.publish(exchange, message.routingKey, message.content, message.options);
        }
      }
      await channel.waitForConfirms();
      const partitionOf = new Map<string, Set<number>>();
      const perQueue: number[] = [];
      for (const [index, queue] of queues.entries()) {
        let count = 0;
        for (;;) {
          const message = await channel.get(queue, { noAck: true });
          if (!message) break;
          count++;
          const { aggregateId } = parseEnvelope(message.content);
          partitionOf.set(aggregateId, (partitionOf.get(aggregateId) ?? new Set()).add(index));
        }
        perQueue.push(count);
      }
      assert.equal(
        perQueue.reduce((a, b) => a + b, 0),
        180,
        'every message reached exactly one partition',
      );
      assert.ok(
        perQueue.every((count) => count > 0),
        `all partitions receive events (${perQueue.join(', ')})`,
      );
      for (const [aggregateId, partitions] of partitionOf)
        assert.equal(partitions.size, 1, `${aggregateId} stays in one partition`);
    } finally {
      await removeTopology(connection, exchange, hashExchange, queues);
      await connection.close();
    }
  });

  test('keeps per-aggregate order with two consumer groups on three partitions and a failover in the middle', async () => {
    const db = await createTestSchema('cvt_topo');
    const connection = await connectRabbit();
    const exchange = uniqueName('cvt.topo.x');
    const prefix = uniqueName('cvt.topo');
    const channel = await connection.createChannel();
    const { hashExchange, queues } = await declare(channel, exchange, prefix, 3);
    const running: Consumer[] = [];
    const relay = new Relay({
      amqpUrl: AMQP_URL,
      pool: db.pool,
      schema: db.schema,
      exchange,
      logger: silentLogger,
      pollIntervalMs: 20,
    });
    try {
      await db.pool.query(
        `CREATE TABLE "${db.schema}".applied (seq bigserial PRIMARY KEY, instance text NOT NULL, aggregate_id text NOT NULL, version int NOT NULL)`,
      );
      const handler =
        (instance: string): EventHandler =>
        async (event, { tx, schema }) => {
          await applyIncrement(tx, { projection: 'orders', event, schema }, async () => {
            return tx.query(`INSERT INTO "${schema}".applied (instance, aggregate_id, version) VALUES ($1, $2, $3)`, [
              instance,
              event.aggregateId,
              event.aggregateVersion,
            ]);
          });
        };
      const common = {
        amqpUrl: AMQP_URL,
        exchange,
        queuePrefix: prefix,
        partitions: 3,
        pool: db.pool,
        schema: db.schema,
        logger: silentLogger,
        batchSize: 8,
        prefetch: 8,
      };
      const first = startPartitionedConsumers({ ...common, handlers: { AmountAdded: handler('first') } });
      running.push(...first);
      await Promise.all(first.map((c) => c.ready()));
      const second = startPartitionedConsumers({ ...common, handlers: { AmountAdded: handler('second') } });
      running.push(...second);
      await Promise.all(second.map((c) => c.ready()));

      const events = Array.from({ length: 10 }, (_, v) =>
        Array.from({ length: 30 }, (_, id) => ({
          aggregateType: 'order',
          aggregateId: `agg-${id}`,
          aggregateVersion: v + 1,
          eventType: 'AmountAdded',
          payload: { v },
        })),
      ).flat();
      await withTransaction(db.pool, (tx) => appendManyToOutbox(tx, events, { schema: db.schema }));
      relay.start();
      const count = async () =>
        Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${db.schema}".applied`)).rows[0]?.n);
      await waitFor(async () => (await count()) >= 60, 'the first group to apply some events');
      // The active group goes away mid-stream; single-active-consumer hands its partitions over.
      await Promise.all(first.map((c) => c.stop()));
      await waitFor(async () => (await count()) === 300, 'all 300 events applied after the failover', 30_000);

      const { rows } = await db.pool.query<{ instance: string; aggregate_id: string; version: number }>(
        `SELECT instance, aggregate_id, version FROM "${db.schema}".applied ORDER BY seq`,
      );
      const byAggregate = new Map<string, number[]>();
      for (const row of rows)
        byAggregate.set(row.aggregate_id, [...(byAggregate.get(row.aggregate_id) ?? []), row.version]);
      for (const [aggregateId, versions] of byAggregate)
        assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], `${aggregateId} applied once each, in order`);
      const instances = new Set(rows.map((row) => row.instance));
      assert.deepEqual([...instances].sort(), ['first', 'second'], 'both groups applied events: the second took over');
    } finally {
      await relay.stop();
      await Promise.all(running.map((c) => c.stop()));
      await removeTopology(connection, exchange, hashExchange, queues);
      await connection.close();
      await db.close();
    }
  });

  test('takes over from the header-hashing exchange of earlier versions, which it deletes, and loses no message of either shape', async () => {
    const connection = await connectRabbit();
    const exchange = uniqueName('cvt.topo.x');
    const prefix = uniqueName('cvt.topo');
    const channel = await connection.createConfirmChannel();
    const legacy = `${prefix}.partitions`;
    const queues = [0, 1, 2].map((p) => `${prefix}.p${p}`);
    try {
      // The topology as an earlier version declared it: `<prefix>.partitions` hashing the x-aggregate-id header.
      await channel.assertExchange(exchange, 'topic', { durable: true });
      await channel.assertExchange(legacy, 'x-consistent-hash', {
        durable: true,
        arguments: { 'hash-header': 'x-aggregate-id' },
      });
      await channel.bindExchange(legacy, exchange, '#');
      for (const queue of queues) {
        await channel.assertQueue(queue, { durable: true, arguments: { 'x-single-active-consumer': true } });
        await channel.bindQueue(queue, legacy, '1');
      }
      const topology = await declare(channel, exchange, prefix, 3, 'classic');
      assert.equal(topology.hashExchange, `${prefix}.by-aggregate`);
      assert.equal(topology.legacyHashExchange, legacy);
      assert.deepEqual(topology.queues, queues, 'the same queues, with what they hold');
      const check = await connection.createChannel();
      check.on('error', () => undefined);
      await assert.rejects(check.checkExchange(legacy), /404/, 'the old exchange is gone');
      await declare(channel, exchange, prefix, 3, 'classic'); // again: idempotent, also without the old exchange

      const key = routingKeyFromTemplate('{aggregateType}.{eventType}');
      for (let id = 0; id < 30; id++) {
        const current = encodeMessage(
          {
            eventId: `n${id}`,
            aggregateType: 'order',
            aggregateId: `agg-${id}`,
            aggregateVersion: 1,
            eventType: 'AmountAdded',
            schemaVersion: 1,
            kind: 'incremental',
            payload: {},
            occurredAt: new Date().toISOString(),
          },
          key,
        );
        channel.publish(exchange, current.routingKey, current.content, current.options);
        // A relay of an earlier version, still running: the header table and no correlation_id.
        const { correlationId: _, ...old } = current.options;
        channel.publish(exchange, current.routingKey, Buffer.from(current.content), {
          ...old,
          messageId: `o${id}`,
          headers: { 'x-aggregate-id': `agg-${id}`, 'x-aggregate-type': 'order' },
        });
      }
      await channel.waitForConfirms();
      const ids: string[] = [];
      for (const queue of queues) {
        for (;;) {
          const message = await channel.get(queue, { noAck: true });
          if (!message) break;
          ids.push(String(message.properties.messageId));
        }
      }
      // Old-shape messages carry no partition key: they share one partition (in order), none is lost or doubled.
      assert.equal(ids.length, 60, 'every message reached exactly one partition');
      assert.equal(new Set(ids).size, 60);
    } finally {
      await dropBrokerNames(connection, [
        ...queues,
        ...queues.map((q) => `${q}.retry`),
        `${prefix}.by-aggregate`,
        legacy,
        exchange,
      ]);
      await connection.close();
    }
  });

  // The shared broker has the plugin, so a type no plugin provides stands in for a missing one:
  // the broker refuses it the same way (connection close, 503 COMMAND_INVALID) through the same mapping.
  test('a broker without the plugin for an exchange type fails with BrokerPluginMissingError naming it', async () => {
    const connection = await connectRabbit();
    const closed = new Promise<Error | undefined>((resolve) => connection.once('close', resolve));
    connection.on('error', () => undefined);
    const missing = { exchangeType: 'x-converge-no-such-type', plugin: 'rabbitmq_converge_no_such_plugin' };
    const error = await probeExchangeType(connection, uniqueName('cvt.topo.probe'), missing).then(
      () => assert.fail('the broker accepted an exchange type no plugin provides'),
      (err: unknown) => err,
    );
    assert.ok(error instanceof BrokerPluginMissingError, `got ${String(error)}`);
    assert.equal(error.code, 'CONVERGE_BROKER_PLUGIN_MISSING');
    assert.deepEqual([error.plugin, error.exchangeType], [missing.plugin, missing.exchangeType]);
    assert.match(error.message, /enable it with: rabbitmq-plugins enable rabbitmq_converge_no_such_plugin$/);
    assert.match(
      (error.cause as Error).message,
      /503 \(COMMAND-INVALID\).*unknown exchange type 'x-converge-no-such-type'/,
    );
    assert.match(String((await closed)?.message), /COMMAND_INVALID/, 'the broker closed the whole connection');
  });

  test('the plugin check passes on a broker with the plugin and leaves no exchange behind', async () => {
    const connection = await connectRabbit();
    const name = uniqueName('cvt.topo.probe');
    try {
      await probeExchangeType(connection, name);
      const check = await connection.createChannel();
      check.on('error', () => undefined);
      await assert.rejects(check.checkExchange(name), /404/);
    } finally {
      await connection.close();
    }
  });
});
