import type { Command } from 'commander';
import { compactInbox, compactionOptions } from '../../ops/index.js';
import { duration, positiveInteger, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';
import { addGuardedAction, addReplayWindowFlags, type BrokerGuardCliOptions } from './cleanup.js';

interface CompactionCliOptions extends BrokerGuardCliOptions {
  consumer: string;
  projection: string;
  olderThan: number;
  retryHorizonMs: number;
  quarantineWindowMs: number;
  batchSize: number;
  maxBatches?: number;
  json?: boolean;
}

/** `compact-inbox`: folds a consumer's old applied inbox rows into per-aggregate watermarks. */
export function registerCompaction(program: Command, context: CommandContext): void {
  const command = program
    .command('compact-inbox')
    .description(
      "replace a consumer's old inbox rows, up to each aggregate's applied projection version, by per-aggregate watermarks",
    )
    .requiredOption('--consumer <name>', 'inbox scope to compact')
    .requiredOption('--projection <name>', 'projection whose applied version bounds each watermark')
    .requiredOption(
      '--older-than <ms>',
      'only rows received longer ago than this; must exceed both windows below',
      duration,
    );
  addReplayWindowFlags(command, true)
    .option(
      '--batch-size <n>',
      'inbox rows per statement',
      positiveInteger,
      schemaDefault<number>(compactionOptions, 'batchSize'),
    )
    .option('--max-batches <n>', 'stop after this many batches', positiveInteger)
    .option('--json', 'the counts as JSON');
  addGuardedAction(
    command,
    context,
    (pool, guard, options: CompactionCliOptions) =>
      compactInbox(pool, {
        ...guard,
        consumer: options.consumer,
        projection: options.projection,
        olderThanMs: options.olderThan,
        retryHorizonMs: options.retryHorizonMs,
        quarantineReplayWindowMs: options.quarantineWindowMs,
        batchSize: options.batchSize,
        ...(options.maxBatches !== undefined ? { maxBatches: options.maxBatches } : {}),
      }),
    (result, options) =>
      options.json
        ? JSON.stringify(result)
        : `compacted ${result.compacted} inbox rows into ${result.watermarks} watermarks in ${result.batches} batches`,
  );
}
