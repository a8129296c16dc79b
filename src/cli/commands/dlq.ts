import type { Command } from 'commander';
import {
  discardQuarantined,
  displayQuarantined,
  listQuarantine,
  quarantineFilterOptions,
  replayQuarantined,
  showQuarantined,
} from '../../ops/index.js';
import { QuarantineNotFoundError } from '../../runtime/errors.js';
import {
  duration,
  each,
  positiveInteger,
  quarantineId,
  AMQP_URL_HELP,
  withBroker,
  withPool,
  type CommandContext,
} from '../context.js';
import { amqpUrl, schemaDefault } from '../env.js';
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
    .option(
      '--older-than <ms>',
      'only messages at least this old',
      duration,
      schemaDefault<number>(quarantineFilterOptions, 'olderThanMs'),
    )
    .option('--all', 'include replayed and discarded ones')
    .option('--limit <n>', 'most rows', positiveInteger, schemaDefault<number>(quarantineFilterOptions, 'limit'))
    .option('--json', 'one JSON document instead of a table')
    .action(async (options: DlqListCliOptions) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const rows = await withPool({ databaseUrl, schema, poolMode }, (pool) =>
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
    .command('show')
    .argument('<id>', 'quarantine id (from dlq list)', quarantineId)
    .description('one quarantined message with its properties (with --body its body, sensitive payload fields masked)')
    .option('--body', 'print the body too, with the fields its producer marked sensitive masked')
    .option(
      '--show-sensitive',
      'print the body and detail unmasked, personal data included (implies --body); a message without sensitivity information has its whole payload masked otherwise',
    )
    .action(async (id: string, options: { body?: boolean; showSensitive?: boolean }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const message = await withPool({ databaseUrl, schema, poolMode }, (pool) =>
        showQuarantined(pool, id, { schema }),
      );
      if (!message) throw new QuarantineNotFoundError(id);
      const { body, ...shown } = displayQuarantined(message, { showSensitive: options.showSensitive ?? false });
      const withBody = options.body || options.showSensitive ? { body } : {};
      console.log(JSON.stringify({ ...shown, ...withBody }, null, 2));
    });

  dlq
    .command('replay')
    .argument('<ids...>', 'quarantine ids (from dlq list)', each(quarantineId))
    .description("send quarantined messages back through the consumer's normal path (inbox, versions, conflicts)")
    .option('--queue <name>', "the queue to send them to (default: each row's consumer's queue)")
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option('--note <text>', 'recorded with the replay')
    .action(async (ids: string[], options: { queue?: string; amqpUrl?: string; note?: string }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const note = options.note ? { note: options.note } : {};
      const queue = options.queue ? { queue: options.queue } : {};
      const sentTo = new Set<string>();
      const omitted: string[] = [];
      const omittedProperties: string[] = [];
      await withBroker(amqpUrl(options.amqpUrl), 'dlq-replay', async (connection) => {
        const publisher = await connection.openPublisher();
        await withPool({ databaseUrl, schema, poolMode }, async (pool) => {
          for (const id of ids) {
            const receipt = await replayQuarantined(pool, publisher, { id, schema, ...queue, ...note });
            sentTo.add(receipt.queue);
            const names = (list: string[]) => `${id}: ${list.map((name) => JSON.stringify(name)).join(', ')}`;
            if (receipt.omittedHeaders.length > 0) omitted.push(names(receipt.omittedHeaders));
            if (receipt.omittedProperties.length > 0) omittedProperties.push(names(receipt.omittedProperties));
          }
        });
      });
      console.log(`replayed ${ids.length} message(s) to ${[...sentTo].join(', ')}`);
      // Header names only, never values: what the broker could not carry, listed on the copy too.
      for (const line of omitted) console.log(`headers omitted (x-converge-headers-omitted) for ${line}`);
      for (const line of omittedProperties)
        console.log(`properties omitted (x-converge-properties-omitted) for ${line}`);
    });

  dlq
    .command('discard')
    .argument('<ids...>', 'quarantine ids (from dlq list)', each(quarantineId))
    .description('close quarantined messages without processing them; the reason is recorded')
    .requiredOption('--reason <text>', 'why (required, kept with the row)')
    .action(async (ids: string[], options: { reason: string }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      await withPool({ databaseUrl, schema, poolMode }, async (pool) => {
        for (const id of ids) await discardQuarantined(pool, { id, reason: options.reason, schema });
      });
      console.log(`discarded ${ids.length} message(s)`);
    });
}
