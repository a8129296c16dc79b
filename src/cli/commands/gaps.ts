import type { Command } from 'commander';
import { gapQueryOptions, readGaps } from '../../inbox/index.js';
import { duration, positiveInteger, withPool, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';
import { gapTable } from '../format.js';

/** `gaps`: aggregates stuck on a missing version; exit code 3 while any is open, so it doubles as an alert check. */
export function registerGaps(program: Command, context: CommandContext): void {
  program
    .command('gaps')
    .description(
      'aggregates whose next version is missing while later versions wait in the reorder buffer (exit 3 while any is open, so it doubles as an alert check)',
    )
    .option('--consumer <name>', 'only this consumer (inbox scope)')
    .option(
      '--older-than <ms>',
      'only gaps open at least this long',
      duration,
      schemaDefault<number>(gapQueryOptions, 'olderThanMs'),
    )
    .option('--limit <n>', 'most rows, oldest first', positiveInteger, schemaDefault<number>(gapQueryOptions, 'limit'))
    .option('--json', 'one JSON document instead of a table')
    .action(async (options: { consumer?: string; olderThan: number; limit: number; json?: boolean }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const query = {
        schema,
        olderThanMs: options.olderThan,
        limit: options.limit,
        ...(options.consumer ? { consumer: options.consumer } : {}),
      };
      const gaps = await withPool({ databaseUrl, schema, poolMode }, (pool) => readGaps(pool, query));
      console.log(options.json ? JSON.stringify(gaps, null, 2) : gapTable(gaps));
      if (gaps.length > 0) process.exitCode = 3;
    });
}
