import type amqp from 'amqplib';
import { z } from 'zod';
import { parseOptions } from '../runtime/options.js';
import { DEFAULT_EXCHANGE } from '../runtime/defaults.js';
import { HEADER } from './wire.js';

export interface PartitionedTopologyOptions {
  /** Topic exchange the relay publishes to. Default `converge.events`. */
  exchange?: string;
  /** Partition queues are `<queuePrefix>.p0` … `<queuePrefix>.p<N-1>`. */
  queuePrefix: string;
  /** Number of partition queues. */
  partitions: number;
  /** Topic patterns this consumer group receives. Default `['#']`. */
  bindings?: string[];
  /**
   * Partition queue type. Default `quorum`: replicated on a cluster, and the only safe choice
   * for single-active-consumer on RabbitMQ 3.10/3.11, whose classic SAC queues can crash
   * when the active consumer goes away (rabbitmq-server#5460).
   */
  queueType?: 'quorum' | 'classic';
}

export interface PartitionedTopology {
  /** The consistent-hash exchange between the topic exchange and the partition queues. */
  hashExchange: string;
  queues: string[];
}

const topologySchema = z.strictObject({
  exchange: z.string().min(1).max(255).optional(),
  queuePrefix: z.string().min(1).max(200).regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : - only'),
  partitions: z.number().int().min(1).max(1024),
  bindings: z.array(z.string().min(1).max(255)).min(1).optional(),
  queueType: z.enum(['quorum', 'classic']).optional(),
});

/**
 * Declares a partitioned consumer group that keeps per-aggregate order while consumers
 * scale out: the topic exchange feeds an `x-consistent-hash` exchange that hashes the
 * `x-aggregate-id` header, so every event of one aggregate lands in the same partition
 * queue; each partition queue is single-active-consumer, so one consumer at a time takes
 * its deliveries and another takes over when it goes away. Each partition also gets its
 * `<queue>.retry` companion (see startConsumer). Needs the rabbitmq_consistent_hash_exchange
 * plugin. Run it once per deployment (or at every start: it is idempotent); start consumers
 * on the returned queues with `declare: false`.
 */
export async function declarePartitionedTopology(channel: amqp.Channel, input: PartitionedTopologyOptions): Promise<PartitionedTopology> {
  const options = parseOptions(topologySchema, input);
  const exchange = options.exchange ?? DEFAULT_EXCHANGE;
  const hashExchange = `${options.queuePrefix}.partitions`;
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertExchange(hashExchange, 'x-consistent-hash', { durable: true, arguments: { 'hash-header': HEADER.aggregateId } });
  for (const pattern of options.bindings ?? ['#']) await channel.bindExchange(hashExchange, exchange, pattern);
  const queueType = { 'x-queue-type': options.queueType ?? 'quorum' };
  const queues: string[] = [];
  for (let partition = 0; partition < options.partitions; partition++) {
    const queue = `${options.queuePrefix}.p${partition}`;
    await channel.assertQueue(queue, { durable: true, arguments: { ...queueType, 'x-single-active-consumer': true } });
    // The binding key of a consistent-hash exchange is the partition's weight.
    await channel.bindQueue(queue, hashExchange, '1');
    // Retry copies wait with a per-message expiry, which classic queues honour at the head.
    await channel.assertQueue(`${queue}.retry`, { durable: true, arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue } });
    queues.push(queue);
  }
  return { hashExchange, queues };
}
