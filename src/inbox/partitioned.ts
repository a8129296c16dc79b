import { z } from 'zod';
import { defineOptions, type OptionsInput } from '../runtime/options.js';
import { startConsumer, type Consumer } from './consumer.js';
import type { ConsumerOptions } from './options.js';
import type { UntypedEvents } from '../envelope/events.js';

/**
 * The options startPartitionedConsumers adds; every other key is a Consumer option (except
 * queue, declare and bindings, which the topology fixes) and is validated by each consumer.
 */
export const partitionedConsumerOptions = defineOptions(
  'startPartitionedConsumers',
  z.strictObject({
    queuePrefix: z.string().min(1).describe('Same prefix as given to declarePartitionedTopology.'),
    partitions: z
      .number()
      .int('must be a positive integer')
      .min(1, 'must be a positive integer')
      .describe('Number of partition queues; one consumer is started per partition.'),
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
 * and fails over to another when it stops.
 */
export function startPartitionedConsumers<M extends object = UntypedEvents>(
  options: PartitionedConsumerOptions<M>,
): Consumer<M>[] {
  const { queuePrefix: prefix, partitions: count, ...rest } = options;
  const { queuePrefix, partitions } = partitionedConsumerOptions.parse({ queuePrefix: prefix, partitions: count });
  return Array.from({ length: partitions }, (_, partition) =>
    startConsumer<M>({
      ...rest,
      queue: `${queuePrefix}.p${partition}`,
      consumer: rest.consumer ?? queuePrefix,
      declare: false,
    }),
  );
}
