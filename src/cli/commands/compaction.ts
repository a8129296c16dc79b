import type { Command } from 'commander';
import { compactInbox } from '../../ops/index.js';
import { integer, withPool, type CommandContext } from '../context.js';

interface CompactionCliOptions {
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
  program
    .command('compact-inbox')
    .description(
      "replace a consumer's old inbox rows, up to each aggregate's applied projection version, by per-aggregate watermarks",
    )
    .requiredOption('--consumer <name>', 'inbox scope to compact')
    .requiredOption('--projection <name>', 'projection whose applied version bounds each watermark')
    .requiredOption(
      '--older-than <ms>',
      'only rows received longer ago than this; must exceed both windows below',
      integer,
    )
    .requiredOption('--retry-horizon-ms <ms>', 'longest a delivery can still come back from the broker', integer)
    .requiredOption('--quarantine-window-ms <ms>', 'how long quarantined messages may still be replayed', integer)
    .option('--batch-size <n>', 'inbox rows per statement', integer, 1_000)
    .option('--max-batches <n>', 'stop after this many batches', integer)
    .option('--json', 'the counts as JSON')
    .action(async (options: CompactionCliOptions) => {
      const { databaseUrl, schema } = context.globals();
      const result = await withPool(databaseUrl, (pool) =>
        compactInbox(pool, {
          schema,
          consumer: options.consumer,
          projection: options.projection,
          olderThanMs: options.olderThan,
          retryHorizonMs: options.retryHorizonMs,
          quarantineReplayWindowMs: options.quarantineWindowMs,
          batchSize: options.batchSize,
          ...(options.maxBatches !== undefined ? { maxBatches: options.maxBatches } : {}),
        }),
      );
      console.log(
        options.json
          ? JSON.stringify(result)
          : `compacted ${result.compacted} inbox rows into ${result.watermarks} watermarks in ${result.batches} batches`,
      );
    });
}
