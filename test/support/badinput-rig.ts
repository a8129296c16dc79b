/**
 * The bad-input tests' rig: one migrated schema, one exchange and queue, a confirm channel that
 * publishes raw bytes as any other AMQP client would (not converge's producer), and the consumer
 * under test. Its consumers are stopped and its broker names removed when the test ends.
 */
import type amqp from 'amqplib';
import type { TransportPublisher } from '../../src/transport/transport.js';
import { startConsumer, type Consumer, type ConsumerOptions } from '../../src/index.js';
import {
  connectRabbit,
  createTestSchema,
  dropTestBroker,
  openConfirmPublisher,
  uniqueName,
  withChannel,
  AMQP_URL,
  type TestDatabase,
} from './rig.js';

/** The routing key the rig publishes with. */
export const ROUTING_KEY = 'order.AmountAdded';
const BACKOFF = { initialDelayMs: 20, maxDelayMs: 100 };

export interface BadInputRig {
  db: TestDatabase;
  /** The test schema, quoted for SQL. */
  q: string;
  channel: amqp.ConfirmChannel;
  /** The transport's publisher on a confirm channel of its own, e.g. for replayQuarantined. */
  publisher: TransportPublisher;
  exchange: string;
  queue: string;
  /**
   * Starts a consumer on the rig's queue, exchange and schema, with a short backoff and AmountAdded
   * known at schema version 1 (`options` adds to or overrides that); stopped when the rig ends.
   */
  start: (options: Partial<ConsumerOptions>) => Consumer;
  /**
   * Publishes raw bytes, persistent and with the header `x-test-case: label` beside the headers of
   * `properties`, and waits for the broker's confirm.
   */
  publish: (label: string, content: Buffer, properties?: amqp.Options.Publish) => Promise<void>;
  messageCount: (queue: string) => Promise<number>;
  /** A further unique broker name (`<prefix>.<base>…`), removed when the rig ends. */
  brokerName: (base: string) => string;
}

/** Runs `fn` on a fresh rig whose names start with `prefix`, then stops its consumers and removes it all. */
export async function withBadInputRig(prefix: string, fn: (rig: BadInputRig) => Promise<void>): Promise<void> {
  const db = await createTestSchema(prefix);
  const connection = await connectRabbit();
  connection.on('error', () => undefined);
  const channel = await connection.createConfirmChannel();
  channel.on('error', () => undefined);
  const publisher = await openConfirmPublisher(connection);
  const exchange = uniqueName(`${prefix}.events`);
  const queue = uniqueName(`${prefix}.q`);
  const brokerNames = [queue, exchange];
  const consumers: Consumer[] = [];
  const rig: BadInputRig = {
    db,
    q: `"${db.schema}"`,
    channel,
    publisher,
    exchange,
    queue,
    start(options) {
      const consumer = startConsumer({
        amqpUrl: AMQP_URL,
        queue,
        exchange,
        pool: db.pool,
        schema: db.schema,
        backoff: BACKOFF,
        reconnectBackoff: BACKOFF,
        schemas: { AmountAdded: { current: 1 } },
        ...options,
      });
      consumers.push(consumer);
      return consumer;
    },
    async publish(label, content, properties = {}) {
      channel.publish(exchange, ROUTING_KEY, content, {
        persistent: true,
        ...properties,
        headers: { 'x-test-case': label, ...(properties.headers as Record<string, unknown> | undefined) },
      });
      await channel.waitForConfirms();
    },
    async messageCount(name) {
      return (await withChannel(connection, (ch) => ch.checkQueue(name))).messageCount;
    },
    brokerName(base) {
      const name = uniqueName(`${prefix}.${base}`);
      brokerNames.push(name);
      return name;
    },
  };
  try {
    await fn(rig);
  } finally {
    for (const consumer of consumers) await consumer.stop();
    await dropTestBroker(connection, brokerNames);
    await connection.close().catch(() => undefined);
    await db.close();
  }
}
