import type { Command } from 'commander';
import { createLogger } from '../../runtime/logger.js';
import { declarePartitionedTopologyAt, partitionedTopologyOptions } from '../../transport/topology.js';
import { AMQP_URL_HELP, positiveInteger, type CommandContext } from '../context.js';
import { amqpUrl, logLevel, schemaDefault } from '../env.js';

interface TopologyCliOptions {
  queuePrefix: string;
  partitions: number;
  amqpUrl?: string;
  exchange: string;
  binding: string[];
  queueType: 'quorum' | 'classic';
  deliveryLimit: number;
  retryTiers: number[];
}

/** One retry tier delay of `--retry-tiers`, in ms. */
function tierDelay(value: string, previous: number[] | undefined): number[] {
  const ms = positiveInteger(value);
  // commander hands the default as `previous` to the first value given: the list given replaces it.
  return previous === DEFAULT_TIERS ? [ms] : [...(previous ?? []), ms];
}

const DEFAULT_TIERS = schemaDefault<number[]>(partitionedTopologyOptions, 'retryTiersMs');

/** `topology`: declares a partitioned consumer group on the broker. */
export function registerTopology(program: Command, _context: CommandContext): void {
  program
    .command('topology')
    .description(
      'declare a partitioned consumer group: consistent-hash routing by aggregate id, single-active-consumer queues',
    )
    .requiredOption('--queue-prefix <name>', 'partition queues are <prefix>.p0 … <prefix>.p<N-1>')
    .requiredOption('--partitions <n>', 'number of partition queues', positiveInteger)
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option(
      '--exchange <name>',
      'topic exchange the relay publishes to',
      schemaDefault<string>(partitionedTopologyOptions, 'exchange'),
    )
    .option(
      '--binding <pattern...>',
      'topic patterns the group receives',
      schemaDefault<string[]>(partitionedTopologyOptions, 'bindings'),
    )
    .option('--queue-type <type>', 'quorum or classic', schemaDefault<string>(partitionedTopologyOptions, 'queueType'))
    .option(
      '--delivery-limit <n>',
      'quorum: returns of a message before it is dead-lettered to <queue>.dead (and quarantined)',
      positiveInteger,
      schemaDefault<number>(partitionedTopologyOptions, 'deliveryLimit'),
    )
    .option(
      '--retry-tiers <ms...>',
      'delays of the retry tiers <queue>.retry.<delay> of each partition; start its consumers with the same retryTiersMs',
      tierDelay,
      DEFAULT_TIERS,
    )
    .action(async (options: TopologyCliOptions) => {
      const logger = createLogger('converge-cli', logLevel());
      const topology = await declarePartitionedTopologyAt(amqpUrl(options.amqpUrl), 'converge-cli topology', logger, {
        exchange: options.exchange,
        queuePrefix: options.queuePrefix,
        partitions: options.partitions,
        bindings: options.binding,
        queueType: options.queueType,
        deliveryLimit: options.deliveryLimit,
        retryTiersMs: options.retryTiers,
      });
      console.log(`declared ${topology.hashExchange} -> ${topology.queues.join(', ')}`);
      const tiers = topology.retryTiers[0] ?? [];
      console.log(`retry tiers of each partition, e.g. ${tiers.map((t) => `${t.queue} (${t.delayMs} ms)`).join(', ')}`);
      console.log(
        'each partition also keeps <queue>.retry, the single retry queue of earlier versions: it drains back on its own; delete it once empty',
      );
    });
}
