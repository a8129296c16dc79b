import { EventEmitter } from 'node:events';
import type amqp from 'amqplib';
import { z } from 'zod';
import { BrokerPluginMissingError } from '../runtime/errors.js';
import type { Logger } from '../runtime/logger.js';
import { openConnection } from './connection.js';
import { defineOptions, type OptionsInput } from '../runtime/options.js';

import { PARTITION_PROPERTY } from './wire.js';
import {
  bindingsOption,
  deliveryLimitOption,
  exchangeOption,
  partitionsOption,
  queueNameOption,
  queueTypeOption,
} from './transport-option.js';
import {
  deadQueueName,
  queueSetArguments,
  retryQueueName,
  retryTiers,
  retryTiersOption,
  type RetryTier,
} from './queue-arguments.js';

export interface PartitionedTopology {
  /** The consistent-hash exchange between the topic exchange and the partition queues. */
  hashExchange: string;
  /** The exchange of earlier versions (`<queuePrefix>.partitions`, hashing a header) that this call removes if it exists. */
  legacyHashExchange: string;
  queues: string[];
  /** The retry tiers of each partition, in the order of `queues`. */
  retryTiers: RetryTier[][];
}

export const partitionedTopologyOptions = defineOptions(
  'declarePartitionedTopology',
  z.strictObject({
    exchange: exchangeOption.describe('Topic exchange the relay publishes to.'),
    queuePrefix: queueNameOption.describe('Partition queues are named `<queuePrefix>.p0` … `<queuePrefix>.p<N-1>`.'),
    partitions: partitionsOption.describe('Number of partition queues.'),
    bindings: bindingsOption.describe('Topic patterns this consumer group receives.'),
    queueType: queueTypeOption
      .default('quorum')
      .describe(
        'Partition queue type. quorum is replicated on a cluster and the only safe single-active-consumer choice on ' +
          'RabbitMQ 3.10/3.11, whose classic SAC queues can crash when the active consumer leaves (rabbitmq-server#5460). ' +
          'quorum partitions get a delivery limit, a quorum `.retry` and a `.dead` queue (see the Consumer options ' +
          'queueType and deliveryLimit); start their consumers with the same queueType.',
      ),
    deliveryLimit: deliveryLimitOption.describe(
      'With quorum: returns of one message (nack, lost channel) before the broker dead-letters it into `<partition>.dead`.',
    ),
    retryTiersMs: retryTiersOption.describe(
      "Delays of each partition's retry tiers `<partition>.retry.<delay>`, in ms; start the partitions' consumers with the same retryTiersMs.",
    ),
  }),
);

export type PartitionedTopologyOptions = OptionsInput<typeof partitionedTopologyOptions>;

/**
 * declarePartitionedTopology on a RabbitMQ connection of its own, named `name` and closed again:
 * for a caller that holds no amqplib channel (the CLI's `topology`).
 */
export async function declarePartitionedTopologyAt(
  urls: string | readonly string[],
  name: string,
  logger: Logger,
  input: PartitionedTopologyOptions,
): Promise<PartitionedTopology> {
  const connection = await openConnection(urls, name, logger, () => undefined);
  try {
    return await declarePartitionedTopology(await connection.createChannel(), input);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * Declares a partitioned consumer group that keeps per-aggregate order while consumers
 * scale out: the topic exchange feeds an `x-consistent-hash` exchange that hashes the
 * message's `correlation_id` property, which the relay sets to the aggregate's partition key
 * (partitionKey in wire.ts), so every event of one aggregate lands in the same partition
 * queue; each partition queue is single-active-consumer, so one consumer at a time takes
 * its deliveries and another takes over when it goes away. Each partition also gets its
 * retry tiers `<queue>.retry.<delay>` (and `<queue>.retry`, kept from earlier versions) and, for quorum partitions, its `<queue>.dead` queue (see startConsumer). Needs the rabbitmq_consistent_hash_exchange
 * plugin. Run it once per deployment (or at every start: it is idempotent); start consumers
 * on the returned queues with `declare: false`.
 *
 * Earlier versions hashed the `x-aggregate-id` header in an exchange named
 * `<queuePrefix>.partitions`. RabbitMQ keeps an exchange's arguments when it is declared again
 * with others, so the hash exchange has a new name, `<queuePrefix>.by-aggregate`; once it is
 * bound, the old one is deleted. Queues and the messages in them stay as they are; while both
 * exchanges were bound a message could reach two partitions, which the inbox takes as a duplicate.
 */
export async function declarePartitionedTopology(
  channel: amqp.Channel,
  input: PartitionedTopologyOptions,
): Promise<PartitionedTopology> {
  const options = partitionedTopologyOptions.parse(input);
  const { exchange } = options;
  const hashExchange = `${options.queuePrefix}.by-aggregate`;
  const legacyHashExchange = `${options.queuePrefix}.partitions`;
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await assertPluginExchange(channel, hashExchange, CONSISTENT_HASH, {
    durable: true,
    arguments: { 'hash-property': PARTITION_PROPERTY },
  });
  const queues: string[] = [];
  const tiersOfQueues: RetryTier[][] = [];
  for (let partition = 0; partition < options.partitions; partition++) {
    const queue = `${options.queuePrefix}.p${partition}`;
    const tiers = retryTiers(queue, options.retryTiersMs);
    const args = queueSetArguments(queue, { ...options, retryTiers: tiers });
    // The dead-letter target first, so it exists before anything can die.
    if (args.dead) await channel.assertQueue(deadQueueName(queue), { durable: true, arguments: args.dead });
    await channel.assertQueue(queue, {
      durable: true,
      arguments: { 'x-queue-type': options.queueType, ...args.main, 'x-single-active-consumer': true },
    });
    // The binding key of a consistent-hash exchange is the partition's weight.
    await channel.bindQueue(queue, hashExchange, '1');
    // Retry copies wait in the tier of their delay; the single retry queue of earlier versions stays so what waits in it drains back.
    await channel.assertQueue(retryQueueName(queue), { durable: true, arguments: args.retry });
    for (const [i, tier] of tiers.entries())
      await channel.assertQueue(tier.queue, { durable: true, arguments: args.tiers[i] });
    queues.push(queue);
    tiersOfQueues.push(tiers);
  }
  // Fed only once every partition is bound, so no message is spread over a partial ring.
  for (const pattern of options.bindings) await channel.bindExchange(hashExchange, exchange, pattern);
  // Only now: until the new exchange feeds every partition, the old one must go on routing.
  await channel.deleteExchange(legacyHashExchange);
  return { hashExchange, legacyHashExchange, queues, retryTiers: tiersOfQueues };
}

/** An exchange type RabbitMQ ships disabled, and the plugin that provides it. */
export interface PluginExchangeType {
  exchangeType: string;
  plugin: string;
}

/** The type the partition exchange of declarePartitionedTopology needs. */
export const CONSISTENT_HASH: PluginExchangeType = {
  exchangeType: 'x-consistent-hash',
  plugin: 'rabbitmq_consistent_hash_exchange',
};

/**
 * The exchange type a broker error refuses as unknown, if that is what it says. RabbitMQ closes the
 * connection with 503 COMMAND_INVALID "unknown exchange type 'T'" when the type was never loaded on
 * the node, or "invalid exchange type 'T'" when its plugin was disabled since.
 */
export function unknownExchangeType(err: unknown): string | undefined {
  if (!(err instanceof Error) || (err as { code?: unknown }).code !== 503) return undefined;
  return /(?:unknown|invalid) exchange type '([^']+)'/.exec(err.message)?.[1];
}

/**
 * Declares an exchange whose type a plugin provides; a missing plugin becomes BrokerPluginMissingError.
 * The broker refuses such a declare by closing the whole connection, so the declare itself only rejects
 * with "Channel ended"; the reason arrives on the connection's 'error' event, watched during the call.
 */
export async function assertPluginExchange(
  channel: amqp.Channel,
  name: string,
  type: PluginExchangeType,
  options: amqp.Options.AssertExchange,
): Promise<void> {
  // amqplib's types hide it, but a channel's connection is the EventEmitter that reports the close.
  const connection: unknown = channel.connection;
  const watched = connection instanceof EventEmitter ? connection : undefined;
  let closedWith: unknown;
  const onError = (err: unknown) => (closedWith = err);
  watched?.on('error', onError);
  try {
    await channel.assertExchange(name, type.exchangeType, options);
  } catch (err) {
    const reason = closedWith ?? err;
    if (unknownExchangeType(reason) === type.exchangeType)
      throw new BrokerPluginMissingError(type.plugin, type.exchangeType, { cause: reason });
    throw err;
  } finally {
    watched?.off('error', onError);
  }
}

/**
 * Proves the broker knows `type`, the only way AMQP can: declares a throwaway internal exchange
 * `name` of that type and deletes it again. A missing plugin closes `connection` (so give it one of
 * its own) and rejects with BrokerPluginMissingError. A refusal for permissions (403) proves the type
 * known too: RabbitMQ checks the type before the permissions.
 */
export async function probeExchangeType(
  connection: amqp.ChannelModel,
  name: string,
  type: PluginExchangeType = CONSISTENT_HASH,
): Promise<void> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined); // the failed call reports it
  try {
    await assertPluginExchange(channel, name, type, { durable: false, autoDelete: true, internal: true });
    await channel.deleteExchange(name);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 403) throw err;
  } finally {
    await channel.close().catch(() => undefined);
  }
}
