import type { Command } from 'commander';
import type pg from 'pg';
import {
  cleanup,
  cleanupOptions,
  createPartitionsAhead,
  DEFAULT_BROKER_MARGIN_MS,
  type BrokerCheck,
  type CleanupResult,
} from '../../ops/index.js';
import { AMQP_URL_HELP, duration, positiveInteger, withPool, type CommandContext } from '../context.js';
import { amqpUrl, schemaDefault } from '../env.js';
import { DEFAULT_RETRY_TIERS_MS } from '../../transport/queue-arguments.js';

/** The flags that name where the consumers' messages wait (cleanup and compact-inbox). */
export interface BrokerGuardCliOptions {
  queue?: string[];
  amqpUrl?: string;
  retryTiers?: number[];
  brokerMarginMs: number;
}

function tierDelay(value: string, previous: number[] | undefined): number[] {
  return [...(previous ?? []), positiveInteger(value)];
}

export function addBrokerGuardFlags(command: Command): Command {
  return command
    .option(
      '--queue <name...>',
      "consumers' queues (with their retry tiers, .retry and .dead): inbox rows younger than the oldest message waiting there stay",
    )
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option(
      '--retry-tiers <ms...>',
      `the consumers' retryTiersMs (default ${DEFAULT_RETRY_TIERS_MS.join(' ')})`,
      tierDelay,
    )
    .option(
      '--broker-margin-ms <ms>',
      'added to the age of the oldest waiting message',
      duration,
      DEFAULT_BROKER_MARGIN_MS,
    );
}

/** The `broker` option from the flags; undefined (no check, a warning) without --queue. */
export function brokerGuard(options: BrokerGuardCliOptions) {
  if (!options.queue?.length) return undefined;
  return {
    amqpUrl: amqpUrl(options.amqpUrl),
    queues: options.queue,
    marginMs: options.brokerMarginMs,
    ...(options.retryTiers ? { retryTiersMs: options.retryTiers } : {}),
  };
}

/**
 * Adds the broker-guard flags and the action: `run` on a pool of the global database and schema,
 * given the guard the flags name, then the broker check (unless --json) and `report`'s line.
 */
export function addGuardedAction<O extends BrokerGuardCliOptions & { json?: boolean }, R extends GuardedResult>(
  command: Command,
  context: CommandContext,
  run: (pool: pg.Pool, guard: { schema: string; broker: ReturnType<typeof brokerGuard> }, options: O) => Promise<R>,
  report: (result: R, options: O) => string,
): void {
  addBrokerGuardFlags(command).action(async (options: O) => {
    const { databaseUrl, schema, poolMode } = context.globals();
    const result = await withPool({ databaseUrl, schema, poolMode }, (pool) =>
      run(pool, { schema, broker: brokerGuard(options) }, options),
    );
    if (!options.json) reportBrokerCheck(result.broker);
    console.log(report(result, options));
  });
}

interface GuardedResult {
  broker?: BrokerCheck | undefined;
}

/** One line on how the broker bounded the inbox deletion; the no-broker warning goes to stderr. */
export function reportBrokerCheck(check: BrokerCheck | undefined): void {
  if (!check) return;
  if (check.warning) console.error(`warning: ${check.warning}`);
  if (check.status === 'bounded')
    console.log(
      `oldest waiting message (${check.queue}) is ${check.oldestMessageAgeMs} ms old: inbox rows younger than ${check.appliedRetentionMs} ms kept`,
    );
  if (check.status === 'unknown-age')
    console.log(`a message of unknown age (no timestamp) waits in ${check.queue}: no inbox row deleted`);
}

interface CleanupCliOptions extends BrokerGuardCliOptions {
  outboxOlderThan?: number;
  inboxOlderThan?: number;
  retryHorizonMs?: number;
  quarantineWindowMs?: number;
  batchSize: number;
  maxBatches?: number;
}

/** The windows inbox rows must outlive (a redelivery, a quarantine replay); required where inbox rows always go. */
export function addReplayWindowFlags(command: Command, required: boolean): Command {
  const add = (flags: string, help: string) =>
    required ? command.requiredOption(flags, help, duration) : command.option(flags, help, duration);
  add('--retry-horizon-ms <ms>', 'longest a delivery can still come back from the broker');
  add('--quarantine-window-ms <ms>', 'how long quarantined messages may still be replayed');
  return command;
}

/** The retention flags of `cleanup` (and of `maintain`, where the outbox window is optional). */
function addRetentionFlags(command: Command, outboxRequired: boolean): Command {
  const outbox = ['--outbox-older-than <ms>', 'published outbox rows older than this go', duration] as const;
  if (outboxRequired) command.requiredOption(...outbox);
  else command.option(...outbox);
  command.option(
    '--inbox-older-than <ms>',
    'inbox rows older than this go; needs the two windows below, and must exceed both',
    duration,
  );
  return addReplayWindowFlags(command, false)
    .option('--batch-size <n>', 'rows per DELETE', positiveInteger, schemaDefault<number>(cleanupOptions, 'batchSize'))
    .option('--max-batches <n>', 'stop after this many batches per table', positiveInteger);
}

function runCleanup(pool: pg.Pool, guard: Guard, options: CleanupCliOptions, outboxOlderThan: number) {
  return cleanup(pool, {
    ...guard,
    outboxRetentionMs: outboxOlderThan,
    batchSize: options.batchSize,
    ...(options.inboxOlderThan !== undefined ? { inboxRetentionMs: options.inboxOlderThan } : {}),
    ...(options.retryHorizonMs !== undefined ? { retryHorizonMs: options.retryHorizonMs } : {}),
    ...(options.quarantineWindowMs !== undefined ? { quarantineReplayWindowMs: options.quarantineWindowMs } : {}),
    ...(options.maxBatches !== undefined ? { maxBatches: options.maxBatches } : {}),
  });
}

type Guard = { schema: string; broker: ReturnType<typeof brokerGuard> };

/** What a cleanup run did, in one line: rows deleted, or on a partitioned schema partitions dropped and kept. */
function describeCleanup(result: CleanupResult): string {
  if (!result.partitions)
    return `deleted ${result.outboxDeleted} outbox and ${result.inboxDeleted} inbox rows in ${result.batches} batches`;
  const { dropped, kept } = result.partitions;
  const keptText = kept.map((k) => `${k.partition} (${k.reason})`).join(', ');
  return `dropped ${dropped.length} partitions${dropped.length ? `: ${dropped.join(', ')}` : ''}; kept ${kept.length}${kept.length ? `: ${keptText}` : ''}`;
}

/** `cleanup`: retention for published outbox rows and, if asked, old inbox rows. */
export function registerCleanup(program: Command, context: CommandContext): void {
  const command = program
    .command('cleanup')
    .description(
      'delete published outbox rows (and, if asked, old inbox rows) past retention, in short bounded batches; on a partitioned schema, drop whole processed partitions',
    );
  addGuardedAction(
    addRetentionFlags(command, true),
    context,
    (pool, guard, options: CleanupCliOptions) => runCleanup(pool, guard, options, options.outboxOlderThan!),
    describeCleanup,
  );
}

/** `maintain`: partitions ahead for a partitioned schema, then retention when its flags are given. */
export function registerMaintain(program: Command, context: CommandContext): void {
  const command = program
    .command('maintain')
    .description(
      'create the outbox and inbox partitions a partitioned schema needs ahead, then (with --outbox-older-than) run cleanup: drop whole processed partitions',
    );
  addGuardedAction(
    addRetentionFlags(command, false),
    context,
    async (pool, guard, options: CleanupCliOptions) => {
      const created = await createPartitionsAhead(pool, { schema: guard.schema });
      const cleaned =
        options.outboxOlderThan === undefined
          ? undefined
          : await runCleanup(pool, guard, options, options.outboxOlderThan);
      return { created, cleaned, broker: cleaned?.broker };
    },
    ({ created, cleaned }) =>
      [
        `created ${created.length} partitions${created.length ? `: ${created.join(', ')}` : ''}`,
        ...(cleaned ? [describeCleanup(cleaned)] : []),
      ].join('\n'),
  );
}
