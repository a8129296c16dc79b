import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { partitionsOption, queueNameOption, queueTypeOption } from '../transport/transport-option.js';
import { BrokerPluginMissingError } from '../runtime/errors.js';
import { describeError } from '../runtime/logger.js';
import { defineOptions, type OptionsInput } from '../runtime/options.js';
import { transportFor } from '../transport/rabbitmq.js';
import { CONSISTENT_HASH } from '../transport/topology.js';
import { startConsumer, type Consumer } from './consumer.js';
import type { ConsumerOptions } from './options.js';
import type { UntypedEvents } from '../envelope/events.js';
import { withConnection } from '../transport/short-lived.js';

/**
 * The options startPartitionedConsumers adds; every other key is a Consumer option (except
 * queue, declare and bindings, which the topology fixes) and is validated by each consumer.
 */
export const partitionedConsumerOptions = defineOptions(
  'startPartitionedConsumers',
  z.strictObject({
    queuePrefix: queueNameOption.describe('Same prefix as given to declarePartitionedTopology.'),
    partitions: partitionsOption.describe('Number of partition queues; one consumer is started per partition.'),
    queueType: queueTypeOption
      .default('quorum')
      .describe(
        "Same as given to declarePartitionedTopology (whose default is also quorum); with quorum each consumer also quarantines what lands in its partition's `.dead` queue.",
      ),
  }),
);

export type PartitionedConsumerOptions<M extends object = UntypedEvents> = OptionsInput<
  typeof partitionedConsumerOptions
> &
  Omit<ConsumerOptions<M>, 'queue' | 'declare' | 'bindings'>;

/**
 * Starts one consumer per partition queue of a topology made by declarePartitionedTopology.
 * All partitions share one inbox scope (the prefix, unless `consumer` is set), so changing
 * the partition count later cannot let a moved aggregate's old events look new. Run the same
 * call in several processes: single-active-consumer makes one of them active per partition
 * and fails over to another when it stops. A broker without the consistent-hash plugin could
 * never route to the partitions: then every `ready()` rejects with BrokerPluginMissingError
 * and the consumers stop.
 */
export function startPartitionedConsumers<M extends object = UntypedEvents>(
  options: PartitionedConsumerOptions<M>,
): Consumer<M>[] {
  const { queuePrefix: prefix, partitions: count, queueType: type, ...rest } = options;
  const { queuePrefix, partitions, queueType } = partitionedConsumerOptions.parse({
    queuePrefix: prefix,
    partitions: count,
    queueType: type,
  });
  const consumers = Array.from({ length: partitions }, (_, partition) =>
    startConsumer<M>({
      ...rest,
      queue: `${queuePrefix}.p${partition}`,
      consumer: rest.consumer ?? queuePrefix,
      queueType,
      declare: false,
    }),
  );
  const pluginChecked = checkPlugin(consumers, queuePrefix);
  pluginChecked.catch(() => undefined); // reported through ready(), which callers may never call
  for (const consumer of consumers) {
    const subscribed = consumer.ready.bind(consumer);
    consumer.ready = () => Promise.all([subscribed(), pluginChecked]).then(() => undefined);
  }
  return consumers;
}

/**
 * Asks the broker once, on a connection of its own, whether it knows the consistent-hash type.
 * Only a definite "no" fails the group; a broker that cannot be asked now is the consumers'
 * reconnect loop's business.
 */
async function checkPlugin(consumers: Consumer[], queuePrefix: string): Promise<void> {
  const { options } = consumers[0]!;
  const { logger } = options;
  // Only RabbitMQ has plugins to check; another transport (options.transport) routes as it does.
  if (options.amqpUrl === undefined || options.transport !== undefined) return;
  try {
    if (!(await consistentHashKnown(options, queuePrefix)))
      throw new BrokerPluginMissingError(CONSISTENT_HASH.plugin, CONSISTENT_HASH.exchangeType);
  } catch (err) {
    if (!(err instanceof BrokerPluginMissingError)) {
      logger.warn({ ...describeError(err), queuePrefix }, 'could not check for the consistent-hash plugin');
      return;
    }
    logger.error({ ...describeError(err), queuePrefix }, 'partitioned consumers stop: broker plugin missing');
    await Promise.all(consumers.map((consumer) => consumer.stop()));
    throw err;
  }
}

async function consistentHashKnown(options: Consumer['options'], queuePrefix: string): Promise<boolean> {
  const probeName = `${queuePrefix}.plugin-check.${randomBytes(4).toString('hex')}`;
  return withConnection(transportFor(options), `converge-consumer ${queuePrefix} plugin check`, (connection) =>
    connection.checkExchangeType(CONSISTENT_HASH.exchangeType, probeName),
  );
}
