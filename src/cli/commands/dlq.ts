import type { Command } from 'commander';
import { discardQuarantined, listQuarantine, replayQuarantined, showQuarantined } from '../../ops/index.js';
import { QuarantineNotFoundError } from '../../runtime/errors.js';
import { AMQP_URL_HELP, integer, withBroker, withPool, type CommandContext } from '../context.js';
import { amqpUrl } from '../env.js';
import { quarantineTable } from '../format.js';

interface DlqListCliOptions {
  consumer?: string;
  reason?: string;
  eventType?: string;
  olderThan: number;
  all?: boolean;
  limit: number;
  json?: boolean;
}

/** `dlq list|show|replay|discard`: the quarantine, read and resolved by an operator. */
export function registerDlq(program: Command, context: CommandContext): void {
  const dlq = program.command('dlq').description('quarantined messages: list, show, replay, discard');

  dlq
    .command('list')
    .description(
      'open quarantined messages, newest first, without bodies; with --all also closed ones and what their replay did',
    )
    .option('--consumer <name>', 'only this consumer (inbox scope)')
    .option('--reason <reason>', 'only this reason, e.g. handler-failed')
    .option('--event-type <type>', 'only this eventType')
    .option('--older-than <ms>', 'only messages at least this old', integer, 0)
    .option('--all', 'include replayed and discarded ones')
    .option('--limit <n>', 'most rows', integer, 100)
    .option('--json', 'one JSON document instead of a table')
    .action(async (options: DlqListCliOptions) => {
      const { databaseUrl, schema } = context.globals();
      const rows = await withPool(databaseUrl, (pool) =>
        listQuarantine(pool, {
          schema,
          olderThanMs: options.olderThan,
          includeResolved: options.all ?? false,
          limit: options.limit,
          ...(options.consumer ? { consumer: options.consumer } : {}),
          ...(options.reason ? { reason: options.reason } : {}),
          ...(options.eventType ? { eventType: options.eventType } : {}),
        }),
      );
      console.log(options.json ? JSON.stringify(rows, null, 2) : quarantineTable(rows));
    });

  dlq
    .command('show <id>')
    .description(
      'one quarantined message with its properties (and with --body its raw body: it may hold personal data)',
    )
    .option('--body', 'print the raw body too')
    .action(async (id: string, options: { body?: boolean }) => {
      const { databaseUrl, schema } = context.globals();
      const message = await withPool(databaseUrl, (pool) => showQuarantined(pool, id, { schema }));
      if (!message) throw new QuarantineNotFoundError(id);
      const { body, ...rest } = message;
      const shown = { ...rest, bodyBytes: body.length, ...(options.body ? { body: body.toString('utf8') } : {}) };
      console.log(JSON.stringify(shown, null, 2));
    });

  dlq
    .command('replay <ids...>')
    .description("send quarantined messages back through the consumer's normal path (inbox, versions, conflicts)")
    .requiredOption('--queue <name>', 'the consumer queue to send them to')
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option('--note <text>', 'recorded with the replay')
    .action(async (ids: string[], options: { queue: string; amqpUrl?: string; note?: string }) => {
      const { databaseUrl, schema } = context.globals();
      const note = options.note ? { note: options.note } : {};
      await withBroker(amqpUrl(options.amqpUrl), 'dlq-replay', async (connection) => {
        const channel = await connection.createConfirmChannel();
        await withPool(databaseUrl, async (pool) => {
          for (const id of ids) await replayQuarantined(pool, channel, { id, queue: options.queue, schema, ...note });
        });
      });
      console.log(`replayed ${ids.length} message(s) to ${options.queue}`);
    });

  dlq
    .command('discard <ids...>')
    .description('close quarantined messages without processing them; the reason is recorded')
    .requiredOption('--reason <text>', 'why (required, kept with the row)')
    .action(async (ids: string[], options: { reason: string }) => {
      const { databaseUrl, schema } = context.globals();
      await withPool(databaseUrl, async (pool) => {
        for (const id of ids) await discardQuarantined(pool, { id, reason: options.reason, schema });
      });
      console.log(`discarded ${ids.length} message(s)`);
    });
}
