import { Command } from 'commander';
import { listOutbox, listOutboxOptions, retryFailedEvents } from '../../ops/index.js';
import { positiveInteger, withPool, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';
import { outboxTable, retryReport } from '../format.js';

/** `outbox list`, `outbox retry`, and `retry-failed`: the same retry command under its older top-level name. */
export function registerOutbox(program: Command, context: CommandContext): void {
  const outbox = program.command('outbox').description('inspect and retry outbox rows');

  outbox
    .command('list')
    .description('outbox rows of one status, oldest first (default: failed), without payloads')
    .option('--failed', 'rows the relay gave up on (default)')
    .option('--pending', 'rows not yet published')
    .option('--limit <n>', 'most rows', positiveInteger, schemaDefault<number>(listOutboxOptions, 'limit'))
    .option('--json', 'one JSON document instead of a table')
    .action(async (options: { failed?: boolean; pending?: boolean; limit: number; json?: boolean }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const status = options.pending && !options.failed ? 'pending' : 'failed';
      const rows = await withPool({ databaseUrl, schema, poolMode }, (pool) =>
        listOutbox(pool, { schema, status, limit: options.limit }),
      );
      console.log(options.json ? JSON.stringify(rows, null, 2) : outboxTable(rows));
    });

  outbox.addCommand(retryCommand('retry', context));
  // commander aliases stay under one parent, so the top-level name is a second instance of the one definition.
  program.addCommand(
    retryCommand('retry-failed', context).description(
      'same as outbox retry: put failed outbox events back in line, same eventIds',
    ),
  );
}

/** Exit code 3 when some rows were refused: the others are retried, those need their data fixed first. */
function retryCommand(name: string, context: CommandContext): Command {
  return new Command(name)
    .description(
      "put failed events back in line, with their original eventIds; rows the table's rules still refuse stay failed and are listed (exit 3)",
    )
    .option('--event-id <id>', 'only this event')
    .option('--json', 'one JSON document (retried eventIds, refused rows) instead of text')
    .action(async (options: { eventId?: string; json?: boolean }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const only = options.eventId ? { eventId: options.eventId } : {};
      const result = await withPool({ databaseUrl, schema, poolMode }, (pool) =>
        retryFailedEvents(pool, { schema, ...only }),
      );
      console.log(options.json ? JSON.stringify(result, null, 2) : retryReport(result));
      if (result.refused.length > 0) process.exitCode = 3;
    });
}
