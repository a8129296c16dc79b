import type { Command } from 'commander';
import { cleanup, cleanupOptions } from '../../ops/index.js';
import { duration, positiveInteger, withPool, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';

interface CleanupCliOptions {
  outboxOlderThan: number;
  inboxOlderThan?: number;
  retryHorizonMs?: number;
  quarantineWindowMs?: number;
  batchSize: number;
  maxBatches?: number;
}

/** `cleanup`: retention for published outbox rows and, if asked, old inbox rows. */
export function registerCleanup(program: Command, context: CommandContext): void {
  program
    .command('cleanup')
    .description(
      'delete published outbox rows (and, if asked, old inbox rows) past retention, in short bounded batches',
    )
    .requiredOption('--outbox-older-than <ms>', 'published outbox rows older than this go', duration)
    .option(
      '--inbox-older-than <ms>',
      'inbox rows older than this go; needs the two windows below, and must exceed both',
      duration,
    )
    .option('--retry-horizon-ms <ms>', 'longest a delivery can still come back from the broker', duration)
    .option('--quarantine-window-ms <ms>', 'how long quarantined messages may still be replayed', duration)
    .option('--batch-size <n>', 'rows per DELETE', positiveInteger, schemaDefault<number>(cleanupOptions, 'batchSize'))
    .option('--max-batches <n>', 'stop after this many batches per table', positiveInteger)
    .action(async (options: CleanupCliOptions) => {
      const { databaseUrl, schema } = context.globals();
      const result = await withPool({ databaseUrl, schema }, (pool) =>
        cleanup(pool, {
          schema,
          outboxRetentionMs: options.outboxOlderThan,
          batchSize: options.batchSize,
          ...(options.inboxOlderThan !== undefined ? { inboxRetentionMs: options.inboxOlderThan } : {}),
          ...(options.retryHorizonMs !== undefined ? { retryHorizonMs: options.retryHorizonMs } : {}),
          ...(options.quarantineWindowMs !== undefined ? { quarantineReplayWindowMs: options.quarantineWindowMs } : {}),
          ...(options.maxBatches !== undefined ? { maxBatches: options.maxBatches } : {}),
        }),
      );
      console.log(
        `deleted ${result.outboxDeleted} outbox and ${result.inboxDeleted} inbox rows in ${result.batches} batches`,
      );
    });
}
