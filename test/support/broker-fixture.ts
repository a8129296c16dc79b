/**
 * The set-up of a test that runs a consumer or a relay on RabbitMQ: a migrated schema, a broker
 * connection with a confirm channel, and an exchange and a queue named after the test's prefix.
 * Consumers and relays started through it run on those, quiet, the relay polling every 20 ms;
 * close() stops them, deletes the queue (with `.retry` and `.dead`), the exchange and any extra
 * name, closes the connection and drops the schema. Built on the rig, so a failed test can keep
 * it all (CONVERGE_KEEP_FAILED).
 */
import type amqp from 'amqplib';
import {
  silentLogger,
  startConsumer,
  startRelay,
  type Consumer,
  type ConsumerOptions,
  type EventEnvelope,
  type Relay,
  type RelayOptions,
} from '../../src/index.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, routingKeyFromTemplate } from '../../src/internal/index.js';
import type { UntypedEvents } from '../../src/envelope/events.js';
import type { TransportPublisher } from '../../src/transport/transport.js';
import {
  AMQP_URL,
  connectRabbit,
  createTestSchema,
  dropTestBroker,
  openConfirmPublisher,
  uniqueName,
  type TestDatabase,
} from './rig.js';

const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);

export interface BrokerFixture {
  db: TestDatabase;
  connection: amqp.ChannelModel;
  channel: amqp.ConfirmChannel;
  /** The transport's publisher on a confirm channel of its own, e.g. for replayQuarantined. */
  publisher: TransportPublisher;
  /** `<prefix>.events`, made unique. */
  exchange: string;
  /** `<prefix>.q`, made unique. */
  queue: string;
  /** A consumer's options on this queue, exchange and schema; `options` override them. */
  consumerOptions: <M extends object = UntypedEvents>(options: Partial<ConsumerOptions<M>>) => ConsumerOptions<M>;
  /** A relay's options on this exchange and schema; `options` override them. */
  relayOptions: (options?: RelayOptions) => RelayOptions;
  /** Starts a consumer on `consumerOptions(options)`; close() stops it. */
  startConsumer: <M extends object = UntypedEvents>(options: Partial<ConsumerOptions<M>>) => Consumer<M>;
  /** Starts a relay on `relayOptions(options)`; close() stops it. */
  startRelay: (options?: RelayOptions) => Relay;
  /** Publishes each envelope as the relay encodes it, then waits for the broker's confirms. */
  publish: (events: EventEnvelope[]) => Promise<void>;
  /** A further queue or exchange name, made unique and deleted by close(). */
  brokerName: (base: string) => string;
  close: () => Promise<void>;
}

/** Opens the fixture; the caller closes it (in an after hook, say). */
export async function openBrokerFixture(prefix: string): Promise<BrokerFixture> {
  const db = await createTestSchema(prefix);
  let connection: amqp.ChannelModel;
  let channel: amqp.ConfirmChannel;
  let publisher: TransportPublisher;
  try {
    connection = await connectRabbit();
    channel = await connection.createConfirmChannel();
    publisher = await openConfirmPublisher(connection);
  } catch (err) {
    await db.close();
    throw err;
  }
  const exchange = uniqueName(`${prefix}.events`);
  const queue = uniqueName(`${prefix}.q`);
  const names = [queue, exchange];
  const started: { stop(): Promise<void> }[] = [];
  const common = { amqpUrl: AMQP_URL, exchange, pool: db.pool, schema: db.schema, logger: silentLogger };
  const consumerOptions = <M extends object>(options: Partial<ConsumerOptions<M>>): ConsumerOptions<M> => ({
    ...common,
    queue,
    ...options,
  });
  const relayOptions = (options: RelayOptions = {}): RelayOptions => ({ ...common, pollIntervalMs: 20, ...options });
  return {
    db,
    connection,
    channel,
    publisher,
    exchange,
    queue,
    consumerOptions,
    relayOptions,
    startConsumer: <M extends object>(options: Partial<ConsumerOptions<M>>) => {
      const consumer = startConsumer<M>(consumerOptions(options));
      started.push(consumer);
      return consumer;
    },
    startRelay: (options?: RelayOptions) => {
      const relay = startRelay(relayOptions(options));
      started.unshift(relay);
      return relay;
    },
    publish: async (events) => {
      for (const event of events) {
        const message = encodeMessage(event, routingKey);
        channel.publish(exchange, message.routingKey, message.content, message.options);
      }
      await channel.waitForConfirms();
    },
    brokerName: (base) => {
      const name = uniqueName(`${prefix}.${base}`);
      names.push(name);
      return name;
    },
    close: async () => {
      // Relays stand first in `started`: they stop before the consumers they publish to.
      for (const component of started) await component.stop();
      await dropTestBroker(connection, names);
      await connection.close();
      await db.close();
    },
  };
}

/** Runs `work` on a fresh fixture and closes it whatever happens. */
export async function withBrokerFixture(
  prefix: string,
  work: (fixture: BrokerFixture) => Promise<void>,
): Promise<void> {
  const fixture = await openBrokerFixture(prefix);
  try {
    await work(fixture);
  } finally {
    await fixture.close();
  }
}
