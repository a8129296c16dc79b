import { ConfigError } from '../runtime/errors.js';
import { startConsumer, type Consumer } from './consumer.js';
import type { ConsumerOptions } from './options.js';

export interface PartitionedConsumerOptions extends Omit<ConsumerOptions, 'queue' | 'declare' | 'bindings'> {
  /** Same prefix as given to declarePartitionedTopology. */
  queuePrefix: string;
  partitions: number;
}

/**
 * Starts one consumer per partition queue of a topology made by declarePartitionedTopology.
 * All partitions share one inbox scope (the prefix, unless `consumer` is set), so changing
 * the partition count later cannot let a moved aggregate's old events look new. Run the same
 * call in several processes: single-active-consumer makes one of them active per partition
 * and fails over to another when it stops.
 */
export function startPartitionedConsumers(options: PartitionedConsumerOptions): Consumer[] {
  const { queuePrefix, partitions, ...rest } = options;
  if (!Number.isInteger(partitions) || partitions < 1)
    throw new ConfigError('partitions', 'must be a positive integer');
  return Array.from({ length: partitions }, (_, partition) =>
    startConsumer({
      ...rest,
      queue: `${queuePrefix}.p${partition}`,
      consumer: rest.consumer ?? queuePrefix,
      declare: false,
    }),
  );
}
