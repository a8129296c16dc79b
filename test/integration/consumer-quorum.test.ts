/**
 * queueType 'quorum': explicit delivery limits, `<queue>.dead` as the dead-letter target, and the
 * consumer quarantining what lands there with its exact bytes. RabbitMQ 4 gives quorum queues a
 * delivery limit of 20 by default and drops past it; these tests show that with converge a message
 * returned past the limit ends in quarantine instead.
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import { declarePartitionedTopology, startPartitionedConsumers, type Consumer } from '../../src/index.js';
import { type ConnectionConfigError } from '../../src/errors.js';
import { decodeProperties } from '../../src/inbox/stored-properties.js';
import { replayQuarantined } from '../../src/ops/index.js';
import { encodeMessage } from '../../src/internal/index.js';
import { queueSetArguments } from '../../src/transport/queue-arguments.js';
import { TcpProxy } from '../../kit/tcp-proxy.js';
import {
  BACKOFF,
  applyOrder,
  routingKey,
  capturingLogger,
  collect,
  envelope,
  quarantineRows,
  withEnv,
  type Env,
} from '../support/consumer-env.js';
import { AMQP_URL, DATABASE_URL, describe, dropBrokerNames, test, uniqueName, waitFor } from '../support/rig.js';

/** Bytes no JSON parser accepts (not UTF-8, U+0000 inside): the dead queue keeps them as they are. */
const POISON = Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x22, 0x61, 0x22, 0x3a, 0x00, 0xc3]);

const SENT_PROPERTIES = {
  messageId: 'M-poison',
  type: 'AmountAdded',
  correlationId: 'corr-7',
  appId: 'raw-client',
  contentType: 'application/octet-stream',
  timestamp: 1_700_000_000,
  headers: { 'x-aggregate-id': 'o1', 'x-tenant': 'acme', 'x-nested': { depth: 2, list: [1, 'two'] } },
} satisfies amqp.Options.Publish;

/**
 * A raw client subscribes to `queue` (basic.get is refused on a single-active-consumer queue) and
 * returns every delivery (nack, requeue) until `done`; returns how often it did.
 */
async function returnUntil(env: Env, queue: string, done: () => Promise<boolean> | boolean): Promise<number> {
  let returns = 0;
  await env.withChannel(async (channel) => {
    await channel.prefetch(1);
    await channel.consume(queue, (message) => {
      if (!message) return;
      returns++;
      channel.nack(message, false, true);
    });
    await waitFor(async () => returns > 0 && (await done()), `the broker to dead-letter the message out of ${queue}`);
  });
  return returns;
}

const deadCount = (env: Env, deadQueue: string) => async () => (await env.checkQueue(deadQueue)).messageCount === 1;

async function exactProperties(env: Env, id: string): Promise<Record<string, unknown>> {
  const { rows } = await env.pool.query<{ properties_exact: string | null; properties: Record<string, unknown> }>(
    `SELECT properties_exact, properties FROM "${env.schema}".quarantine WHERE id = $1`,
    [id],
  );
  return decodeProperties(rows[0]!.properties_exact, rows[0]!.properties);
}

/** The stored properties hold everything the publisher sent, and the broker's record of the death. */
function assertKeptAsSent(stored: Record<string, unknown>, diedIn: string): void {
  const { headers: sentHeaders, ...sent } = SENT_PROPERTIES;
  for (const [name, value] of Object.entries(sent)) assert.deepEqual(stored[name], value, `property ${name}`);
  const headers = stored.headers as Record<string, unknown>;
  for (const [name, value] of Object.entries(sentHeaders)) assert.deepEqual(headers[name], value, `header ${name}`);
  const deaths = headers['x-death'] as { queue: string; reason: string }[];
  assert.equal(deaths[0]?.queue, diedIn);
  assert.equal(deaths[0]?.reason, 'delivery_limit');
}

const handlers = (env: Env) => ({ AmountAdded: applyOrder(env.schema) });

describe('consumer with queueType quorum', () => {
  test('a message returned past the delivery limit lands in quarantine with its exact bytes, properties and headers', async () => {
    await withEnv(async (env) => {
      const options = { queueType: 'quorum', deliveryLimit: 2, handlers: handlers(env) } as const;
      const declaring = env.start(options);
      await declaring.ready();
      await env.stop(declaring);

      env.channel.publish('', env.queue, POISON, SENT_PROPERTIES);
      await env.channel.waitForConfirms();
      const returns = await returnUntil(env, env.queue, deadCount(env, `${env.queue}.dead`));
      // RabbitMQ 3.10 dead-letters once the count passes the limit; other versions may stop at the limit.
      assert.ok(returns >= 2 && returns <= 3, `returned ${returns} times`);
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'not redelivered forever');

      const consumer = env.start(options);
      const settled = collect(consumer);
      await consumer.ready();
      const [row] = await waitFor(async () => {
        const rows = await quarantineRows(env);
        return rows.length > 0 && rows;
      }, 'the dead message in quarantine');
      assert.equal(row!.reason, 'delivery-limit-exceeded');
      assert.equal(row!.failure_class, 'exhausted');
      assert.equal(row!.event_id, 'M-poison');
      assert.equal(row!.consumer, env.queue);
      assert.ok(row!.body.equals(POISON), 'the body is kept byte for byte');
      assert.match(row!.detail, new RegExp(`from queue ${env.queue.replaceAll('.', '\\.')} into`));
      assertKeptAsSent(await exactProperties(env, row!.id), env.queue);

      await waitFor(() => consumer.stats.quarantined === 1, 'the quarantine to be counted');
      const last = settled.at(-1)!;
      assert.ok(last.action === 'ack' && last.outcome === 'quarantined' && last.reason === 'delivery-limit-exceeded');
      await waitFor(
        async () => (await env.checkQueue(`${env.queue}.dead`)).messageCount === 0,
        'the dead message acked',
      );
      await env.stop(consumer);
      assert.equal((await env.checkQueue(`${env.queue}.dead`)).messageCount, 0, 'nothing came back unacked');
    });
  });

  test('declares quorum queues with explicit limits and dead-letter targets; other arguments are refused (406)', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ queueType: 'quorum', deliveryLimit: 3, handlers: handlers(env) });
      await consumer.ready();
      await env.stop(consumer);
      const args = queueSetArguments(env.queue, { queueType: 'quorum', deliveryLimit: 3 });
      const declare = (queue: string, args: Record<string, unknown>) =>
        env.withChannel((channel) => channel.assertQueue(queue, { durable: true, arguments: args }));
      // Declaring again with the same arguments succeeds only if they are exactly what the queue has.
      await declare(env.queue, args.main);
      await declare(`${env.queue}.retry`, args.retry);
      await declare(`${env.queue}.dead`, args.dead!);
      assert.equal(args.main['x-dead-letter-routing-key'], `${env.queue}.dead`);
      assert.equal(args.main['x-dead-letter-strategy'], 'at-least-once');
      assert.equal(args.retry['x-dead-letter-routing-key'], env.queue);

      await assert.rejects(
        declare(env.queue, { ...args.main, 'x-delivery-limit': 4 }),
        /inequivalent arg 'x-delivery-limit'/,
      );
      await assert.rejects(declare(env.queue, {}), /PRECONDITION_FAILED/);
      await assert.rejects(
        declare(`${env.queue}.retry`, queueSetArguments(env.queue, { queueType: 'classic', deliveryLimit: 3 }).retry),
        /PRECONDITION_FAILED/,
      );

      // The consumer says so too: its queue exists with another type, which retrying cannot fix.
      const classic = env.start({ queueType: 'classic', handlers: handlers(env) });
      const refused = await classic.ready().then(
        () => undefined,
        (err: unknown) => err as ConnectionConfigError,
      );
      assert.equal(refused?.code, 'CONVERGE_BROKER_REJECTED');
      await env.stop(classic);
    });
  });

  test('classic, the default, declares exactly what it always did and no dead queue', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: handlers(env) });
      await consumer.ready();
      await env.stop(consumer);
      await env.withChannel((channel) => channel.assertQueue(env.queue, { durable: true }));
      await env.withChannel((channel) =>
        channel.assertQueue(`${env.queue}.retry`, {
          durable: true,
          arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': env.queue },
        }),
      );
      await assert.rejects(env.checkQueue(`${env.queue}.dead`), /NOT_FOUND/);
    });
  });

  test('a retry goes through the quorum retry queue and applies once', async () => {
    await withEnv(async (env) => {
      const apply = applyOrder(env.schema);
      let calls = 0;
      const consumer = env.start({
        queueType: 'quorum',
        deliveryLimit: 1,
        handlers: {
          AmountAdded: async (event, ctx) => {
            if (++calls === 1) throw new Error('downstream hiccup');
            await apply(event, ctx);
          },
        },
      });
      await consumer.ready();
      await env.publish(envelope('E1', 'o1', 1, { delta: 5 }));
      await waitFor(() => consumer.stats.applied === 1, 'the retried event to apply');
      assert.equal(consumer.stats.retried, 1);
      assert.equal(calls, 2);
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 1, 'applied once');
      assert.equal((await quarantineRows(env)).length, 0, 'a retry is a copy: it never counts towards the limit');
      await env.stop(consumer);
      for (const queue of [env.queue, `${env.queue}.retry`, `${env.queue}.dead`])
        assert.equal((await env.checkQueue(queue)).messageCount, 0, `${queue} is empty`);
    });
  });

  test('a replayed dead message that is retried comes back from the retry queue (RabbitMQ would drop it as a cycle)', async () => {
    await withEnv(async (env) => {
      const apply = applyOrder(env.schema);
      let calls = 0;
      const options = {
        queueType: 'quorum',
        deliveryLimit: 1,
        handlers: {
          AmountAdded: async (...args: Parameters<typeof apply>) => {
            if (++calls === 1) throw new Error('downstream hiccup');
            await apply(...args);
          },
        },
      } as const;
      const declaring = env.start(options);
      await declaring.ready();
      await env.stop(declaring);
      const message = encodeMessage(envelope('E1', 'o1', 1, { delta: 5 }), routingKey);
      env.channel.publish('', env.queue, message.content, message.options);
      await env.channel.waitForConfirms();
      await returnUntil(env, env.queue, deadCount(env, `${env.queue}.dead`));

      const consumer = env.start(options);
      const [row] = await waitFor(async () => {
        const rows = await quarantineRows(env);
        return rows.length > 0 && rows;
      }, 'the dead message in quarantine');
      assert.equal(calls, 0, 'quarantined from the dead queue without running the handler');
      // The replay carries the x-death that names env.queue; its retry copy must not, or the broker's
      // cycle detection drops it on its way back from the retry queue into env.queue.
      await replayQuarantined(env.pool, env.publisher, { id: row!.id, queue: env.queue, schema: env.schema });
      await waitFor(() => consumer.stats.applied === 1, 'the replayed event to apply after one retry');
      assert.equal(calls, 2);
      assert.equal(consumer.stats.retried, 1);
      await env.stop(consumer);
    });
  });

  test('a dead message waits, unacknowledged, while the database is down, and is quarantined once it is back', async () => {
    await withEnv(async (env) => {
      const proxy = await TcpProxy.inFrontOf(DATABASE_URL, 5432);
      const logger = capturingLogger();
      const consumer = env.start({
        queueType: 'quorum',
        deliveryLimit: 1,
        handlers: handlers(env),
        pool: undefined,
        connectionString: proxy.url(DATABASE_URL),
        logger,
      });
      try {
        await consumer.ready();
        proxy.cut();
        const waits = () => logger.records.filter((r) => r.includes('dead message kept unacknowledged'));
        // Dies into this consumer's dead queue while it runs: a queue of its own, so the consumer does not take it first.
        const source = uniqueName('cvc.src');
        await env.withChannel((channel) =>
          channel.assertQueue(source, {
            durable: true,
            arguments: { ...queueSetArguments(env.queue, { queueType: 'quorum', deliveryLimit: 1 }).main },
          }),
        );
        env.channel.publish('', source, POISON, SENT_PROPERTIES);
        await env.channel.waitForConfirms();
        await returnUntil(env, source, () => waits().length > 0);

        await waitFor(() => waits().length >= 3, 'three failed attempts at the quarantine row');
        const delays = waits().map((r) => (JSON.parse(r) as { delayMs: number }).delayMs);
        assert.ok(
          delays.every((ms) => ms >= BACKOFF.initialDelayMs / 2),
          `each attempt waits its backoff: ${delays.join(', ')}`,
        );
        assert.equal((await quarantineRows(env)).length, 0);
        assert.equal((await env.checkQueue(`${env.queue}.dead`)).messageCount, 0, 'held by the consumer, not requeued');
        assert.ok(!logger.records.some((r) => r.includes('x-tenant') || r.includes('acme')), 'no headers in logs');

        proxy.restore();
        const [row] = await waitFor(async () => {
          const rows = await quarantineRows(env);
          return rows.length > 0 && rows;
        }, 'the quarantine row once the database is back');
        assert.equal(row!.reason, 'delivery-limit-exceeded');
        assert.ok(row!.body.equals(POISON));
        assertKeptAsSent(await exactProperties(env, row!.id), source);
        await env.stop(consumer);
        assert.equal((await env.checkQueue(`${env.queue}.dead`)).messageCount, 0, 'acked after the row committed');
      } finally {
        await env.stop(consumer);
        await proxy.close();
      }
    });
  });
});

describe('partitioned topology with quorum queues', () => {
  test('declares .retry and .dead per partition; a message returned past the limit is quarantined', async () => {
    await withEnv(async (env) => {
      const queuePrefix = uniqueName('cvc.part');
      const { queues, hashExchange } = await env.withChannel((channel) =>
        declarePartitionedTopology(channel, { exchange: env.exchange, queuePrefix, partitions: 2, deliveryLimit: 1 }),
      );
      const consumers: Consumer[] = [];
      try {
        for (const queue of queues) {
          const args = queueSetArguments(queue, { queueType: 'quorum', deliveryLimit: 1 });
          await env.withChannel((channel) =>
            channel.assertQueue(queue, {
              durable: true,
              arguments: { ...args.main, 'x-single-active-consumer': true },
            }),
          );
          await env.withChannel((channel) =>
            channel.assertQueue(`${queue}.retry`, { durable: true, arguments: args.retry }),
          );
          await env.withChannel((channel) =>
            channel.assertQueue(`${queue}.dead`, { durable: true, arguments: args.dead! }),
          );
        }

        const partition = queues[1]!;
        env.channel.publish('', partition, POISON, SENT_PROPERTIES);
        await env.channel.waitForConfirms();
        await returnUntil(env, partition, deadCount(env, `${partition}.dead`));

        consumers.push(
          ...startPartitionedConsumers({
            queuePrefix,
            partitions: 2,
            amqpUrl: AMQP_URL,
            pool: env.pool,
            schema: env.schema,
            handlers: handlers(env),
            backoff: BACKOFF,
            reconnectBackoff: BACKOFF,
          }),
        );
        await Promise.all(consumers.map((consumer) => consumer.ready()));
        const [row] = await waitFor(async () => {
          const rows = await quarantineRows(env);
          return rows.length > 0 && rows;
        }, 'the dead partition message in quarantine');
        assert.equal(row!.reason, 'delivery-limit-exceeded');
        assert.equal(row!.consumer, queuePrefix, 'the partitions share the inbox scope');
        assert.ok(row!.body.equals(POISON));
        assertKeptAsSent(await exactProperties(env, row!.id), partition);
      } finally {
        await Promise.all(consumers.map((consumer) => consumer.stop()));
        // Partition queues are named from the prefix, not by the rig: they go now.
        await dropBrokerNames(env.connection, [...queues, hashExchange]);
      }
    });
  });
});
