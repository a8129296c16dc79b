import amqp from 'amqplib';
import { Command, InvalidArgumentError, Option } from 'commander';
import pg from 'pg';
import { ConvergeError } from '../runtime/errors.js';
import { amqpUrl, databaseUrl, logLevel, LOCAL_AMQP_URL, LOCAL_DATABASE_URL, relayFlagDefaults } from './env.js';
import { createLogger } from '../runtime/logger.js';
import { listOutbox, readStatus, retryFailedEvents, type OutboxRow } from '../ops/status.js';
import { registerConvergenceMetrics, serveMetrics, serveRelayMetrics } from '../metrics/metrics.js';
import { cleanup } from '../ops/cleanup.js';
import { compactInbox } from '../ops/compaction.js';
import { discardQuarantined, listQuarantine, replayQuarantined, showQuarantined, type QuarantineSummary } from '../ops/dlq.js';
import { readGaps, type Gap } from '../inbox/index.js';
import { table } from './format.js';
import { parseQueue, parseSource, statusCommand, type StatusCliOptions } from './status.js';
import { rebuildCommand, reconcileCommand, type RebuildCliOptions, type ReconcileCliOptions } from './reconcile.js';
import { startRelay } from '../relay/relay.js';
import { migrate, migrationSql } from '../schema/migrate.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { grantsSql } from '../schema/grants.js';
import { declarePartitionedTopology } from '../transport/topology.js';

function integer(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed)) throw new InvalidArgumentError('not an integer');
  return parsed;
}

async function withPool<T>(databaseUrl: string, work: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, application_name: 'converge-cli' });
  try {
    return await work(pool);
  } finally {
    await pool.end();
  }
}

/** Connection strings are read when a command runs, so --help never prints a password from the environment. */
function globalOptions(): { databaseUrl: string; schema: string } {
  const opts = program.opts<{ databaseUrl?: string; schema: string }>();
  return { databaseUrl: databaseUrl(opts.databaseUrl), schema: opts.schema };
}

const AMQP_URL_HELP = `RabbitMQ URL (default: env AMQP_URL, else ${LOCAL_AMQP_URL})`;

const program = new Command()
  .name('converge')
  .description('Transactional outbox relay and operations for converge')
  .option('--database-url <url>', `PostgreSQL connection string (default: env DATABASE_URL, else ${LOCAL_DATABASE_URL})`)
  .option('--schema <name>', 'schema holding converge tables', DEFAULT_SCHEMA);

program
  .command('migrate')
  .description('create or upgrade converge tables (idempotent, safe to run concurrently)')
  .option('--print-sql', 'print the SQL instead of running it')
  .action(async (options: { printSql?: boolean }) => {
    const { databaseUrl, schema } = globalOptions();
    if (options.printSql) {
      process.stdout.write(`${migrationSql(schema)}\n`);
      return;
    }
    const result = await migrate(databaseUrl, { schema });
    console.log(result.applied.length > 0 ? `schema ${schema}: applied migrations ${result.applied.join(', ')}` : `schema ${schema}: already at migration ${result.version}`);
  });

program
  .command('grants')
  .description('print least-privilege GRANT statements for relay, consumer and producer roles (run them as the schema owner after migrate)')
  .option('--relay-role <role>', 'role the relay connects as')
  .option('--consumer-role <role...>', 'role(s) consumers connect as')
  .option('--producer-role <role>', 'role the application appends to the outbox as')
  .option('--projection-table <schema.table...>', 'read-model tables the consumer roles write')
  .action((options: { relayRole?: string; consumerRole?: string[]; producerRole?: string; projectionTable?: string[] }) => {
    const { schema } = globalOptions();
    process.stdout.write(
      `${grantsSql({
        schema,
        ...(options.relayRole !== undefined ? { relayRole: options.relayRole } : {}),
        ...(options.consumerRole !== undefined ? { consumerRoles: options.consumerRole } : {}),
        ...(options.producerRole !== undefined ? { producerRole: options.producerRole } : {}),
        ...(options.projectionTable !== undefined ? { projectionTables: options.projectionTable } : {}),
      })}\n`,
    );
  });

program
  .command('relay')
  .description('publish committed outbox events to RabbitMQ until SIGTERM/SIGINT')
  .option('--amqp-url <url>', AMQP_URL_HELP)
  .option('--exchange <name>', 'topic exchange to publish to', relayFlagDefaults.exchange)
  .option('--routing-key <template>', 'routing key template', relayFlagDefaults.routingKey)
  .option('--batch-size <n>', 'rows claimed per cycle', integer, relayFlagDefaults.batchSize)
  .option('--lease-ms <n>', 'claim lease in ms', integer, relayFlagDefaults.leaseMs)
  .option('--poll-ms <n>', 'idle poll interval in ms', integer, relayFlagDefaults.pollIntervalMs)
  .option('--max-attempts <n>', 'attempts before an event is marked failed', integer, relayFlagDefaults.maxAttempts)
  .option('--relay-id <id>', 'identity recorded in claimed_by')
  .addOption(new Option('--metrics-port <n>', 'serve /metrics, /healthz and /readyz on this port').env('CONVERGE_METRICS_PORT').argParser(integer))
  .option('--metrics-host <host>', 'address the metrics endpoint binds', '127.0.0.1')
  .action(async (options: { amqpUrl?: string; exchange: string; routingKey: string; batchSize: number; leaseMs: number; pollMs: number; maxAttempts: number; relayId?: string; metricsPort?: number; metricsHost: string }) => {
    const { databaseUrl, schema } = globalOptions();
    const logger = createLogger('converge-relay', logLevel());
    const relay = startRelay({
      connectionString: databaseUrl,
      amqpUrl: amqpUrl(options.amqpUrl),
      schema,
      exchange: options.exchange,
      routingKey: options.routingKey,
      batchSize: options.batchSize,
      leaseMs: options.leaseMs,
      pollIntervalMs: options.pollMs,
      maxAttempts: options.maxAttempts,
      ...(options.relayId ? { relayId: options.relayId } : {}),
      logger,
    });
    const metrics = options.metricsPort !== undefined ? serveRelayMetrics(relay, { port: options.metricsPort, host: options.metricsHost }) : undefined;
    logger.info({ relayId: relay.options.relayId, schema, exchange: options.exchange, metrics: metrics ? await metrics.url : undefined }, 'relay started');
    await new Promise<void>((resolve) => {
      const done = () => resolve();
      process.once('SIGTERM', done);
      process.once('SIGINT', done);
    });
    await relay.stop();
    await metrics?.close();
    logger.info({ relayId: relay.options.relayId }, 'relay stopped');
  });

program
  .command('topology')
  .description('declare a partitioned consumer group: consistent-hash routing by aggregate id, single-active-consumer queues')
  .requiredOption('--queue-prefix <name>', 'partition queues are <prefix>.p0 … <prefix>.p<N-1>')
  .requiredOption('--partitions <n>', 'number of partition queues', integer)
  .option('--amqp-url <url>', AMQP_URL_HELP)
  .option('--exchange <name>', 'topic exchange the relay publishes to', relayFlagDefaults.exchange)
  .option('--binding <pattern...>', 'topic patterns the group receives', ['#'])
  .option('--queue-type <type>', 'quorum or classic', 'quorum')
  .action(async (options: { queuePrefix: string; partitions: number; amqpUrl?: string; exchange: string; binding: string[]; queueType: 'quorum' | 'classic' }) => {
    const connection = await amqp.connect(amqpUrl(options.amqpUrl));
    try {
      const channel = await connection.createChannel();
      const topology = await declarePartitionedTopology(channel, {
        exchange: options.exchange,
        queuePrefix: options.queuePrefix,
        partitions: options.partitions,
        bindings: options.binding,
        queueType: options.queueType,
      });
      console.log(`declared ${topology.hashExchange} -> ${topology.queues.join(', ')}`);
    } finally {
      await connection.close();
    }
  });

program
  .command('status')
  .description('where the pipeline stalls: each stage from durable progress, rates, drain time, lag and permanent failures (exit 2 while stalled)')
  .option('--source <spec>', 'a business table to check for changes without an outbox event: table=public.orders,type=order[,id=id][,version=version][,changed-at=updated_at] (repeatable)', parseSource, [])
  .option('--queue <spec>', 'a queue to watch: name[,consumer=inbox scope][,projection=name] (repeatable)', parseQueue, [])
  .option('--amqp-url <url>', `RabbitMQ URL for queue depths (default: env AMQP_URL, else ${LOCAL_AMQP_URL})`)
  .option('--window-ms <ms>', 'lag and projection activity over this window', integer, 60_000)
  .option('--sample-ms <ms>', 'rates from two samples this far apart', integer, 5_000)
  .option('--stall-after-ms <ms>', 'pending events and missing versions older than this are stalls', integer, 30_000)
  .option('--source-lookback-ms <ms>', 'with changed-at: source rows changed this recently are checked', integer, 3_600_000)
  .option('--json', 'one JSON document instead of the table')
  .action(async (options: StatusCliOptions) => {
    const { databaseUrl, schema } = globalOptions();
    process.exitCode = await withPool(databaseUrl, (pool) => statusCommand(pool, schema, options));
  });

program
  .command('gaps')
  .description('aggregates whose next version is missing while later versions wait in the reorder buffer')
  .option('--consumer <name>', 'only this consumer (inbox scope)')
  .option('--older-than <ms>', 'only gaps open at least this long', integer, 0)
  .option('--limit <n>', 'most rows, oldest first', integer, 1_000)
  .option('--json', 'one JSON document instead of a table')
  .action(async (options: { consumer?: string; olderThan: number; limit: number; json?: boolean }) => {
    const { databaseUrl, schema } = globalOptions();
    const gaps = await withPool(databaseUrl, (pool) => readGaps(pool, { schema, olderThanMs: options.olderThan, limit: options.limit, ...(options.consumer ? { consumer: options.consumer } : {}) }));
    if (options.json) console.log(JSON.stringify(gaps, null, 2));
    else console.log(gapTable(gaps));
    // Non-zero when something is stuck, so the command doubles as an alert check.
    if (gaps.length > 0) process.exitCode = 3;
  });

program
  .command('reconcile')
  .description('compare a projection with its source by keyset pages; report (and with --repair fix) every difference')
  .requiredOption('--projection <name>', 'projection name in projection_state')
  .requiredOption('--aggregate-type <type>', 'aggregate type of the rows compared')
  .requiredOption('--source-sql <sql>', 'page query on the source: $1 = after id (\'\' at the start), $2 = limit; returns id, version, [deleted], key fields; ORDER BY id COLLATE "C"')
  .option('--source-database-url <url>', 'source database (default: the projection database)')
  .option('--target-sql <sql>', 'page query on the projection side, same shape (default: versions from projection_state)')
  .option('--count-sql <sql>', 'count of source rows, for the ETA')
  .option('--page-size <n>', 'rows per page', integer, 500)
  .option('--after <id>', 'resume after this id (the cursor of an earlier run)')
  .option('--max-rate <n>', 'most rows compared per second', integer)
  .option('--sample <n>', 'ids shown per difference', integer, 10)
  .option('--repair', 'repair missing, stale and mismatch rows (conditional, safe with live consumers)')
  .option('--apply-sql <sql>', 'with --repair: writes one row of the read model; $1 id, $2 version, $3 fields as jsonb, $4 deleted (also the CTE converge_row)')
  .option('--lookup-sql <sql>', 'with --repair and --remove-sql: reads one source row by $1 id, to confirm an extra row is really gone')
  .option('--remove-sql <sql>', 'with --repair and --lookup-sql: removes one read-model row by $1 id')
  .option('--json', 'one JSON document instead of a table')
  .action(async (options: ReconcileCliOptions) => {
    const { databaseUrl, schema } = globalOptions();
    process.exitCode = await reconcileCommand(databaseUrl, schema, options);
  });

program
  .command('rebuild')
  .description('rebuild a lost or corrupted projection from the source: forget its versions, empty it, write every source row (stop its consumers first)')
  .requiredOption('--projection <name>', 'projection name in projection_state')
  .requiredOption('--aggregate-type <type>', 'aggregate type to rebuild')
  .requiredOption('--source-sql <sql>', 'page query on the source (primary): $1 = after id, $2 = limit; returns id, version, [deleted], fields; ORDER BY id COLLATE "C"')
  .requiredOption('--apply-sql <sql>', 'writes one row of the read model; $1 id, $2 version, $3 fields as jsonb, $4 deleted (also the CTE converge_row)')
  .requiredOption('--reset-sql <sql>', 'empties the read model, on the transaction that forgets the versions (e.g. TRUNCATE order_search)')
  .option('--source-database-url <url>', 'source database (default: the projection database)')
  .option('--page-size <n>', 'rows per page', integer, 500)
  .option('--max-rate <n>', 'most rows written per second', integer)
  .option('--json', 'the report as JSON')
  .action(async (options: RebuildCliOptions) => {
    const { databaseUrl, schema } = globalOptions();
    process.exitCode = await rebuildCommand(databaseUrl, schema, options);
  });

program
  .command('metrics')
  .description('serve convergence gauges (reorder buffer, gaps) on /metrics for Prometheus until SIGTERM/SIGINT')
  .option('--port <n>', 'port to listen on', integer, 9464)
  .option('--host <host>', 'address to bind', '127.0.0.1')
  .option('--gap-after-ms <n>', 'an aggregate counts as a gap after waiting this long', integer, 60_000)
  .action(async (options: { port: number; host: string; gapAfterMs: number }) => {
    const { databaseUrl, schema } = globalOptions();
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 2, application_name: 'converge-metrics' });
    pool.on('error', () => undefined);
    const server = await serveMetrics(registerConvergenceMetrics({ pool, schema, gapAfterMs: options.gapAfterMs }), { port: options.port, host: options.host });
    console.log(`serving /metrics on ${options.host}:${options.port}`);
    await new Promise<void>((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
    });
    server.close();
    await pool.end();
  });

program
  .command('cleanup')
  .description('delete published outbox rows (and, if asked, old inbox rows) past retention, in short bounded batches')
  .requiredOption('--outbox-older-than <ms>', 'published outbox rows older than this go', integer)
  .option('--inbox-older-than <ms>', 'inbox rows older than this go; needs the two windows below, and must exceed both', integer)
  .option('--retry-horizon-ms <ms>', 'longest a delivery can still come back from the broker', integer)
  .option('--quarantine-window-ms <ms>', 'how long quarantined messages may still be replayed', integer)
  .option('--batch-size <n>', 'rows per DELETE', integer, 1_000)
  .option('--max-batches <n>', 'stop after this many batches per table', integer)
  .action(async (options: { outboxOlderThan: number; inboxOlderThan?: number; retryHorizonMs?: number; quarantineWindowMs?: number; batchSize: number; maxBatches?: number }) => {
    const { databaseUrl, schema } = globalOptions();
    const result = await withPool(databaseUrl, (pool) =>
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
    console.log(`deleted ${result.outboxDeleted} outbox and ${result.inboxDeleted} inbox rows in ${result.batches} batches`);
  });

program
  .command('compact-inbox')
  .description("replace a consumer's old inbox rows, up to each aggregate's applied projection version, by per-aggregate watermarks")
  .requiredOption('--consumer <name>', 'inbox scope to compact')
  .requiredOption('--projection <name>', 'projection whose applied version bounds each watermark')
  .requiredOption('--older-than <ms>', 'only rows received longer ago than this; must exceed both windows below', integer)
  .requiredOption('--retry-horizon-ms <ms>', 'longest a delivery can still come back from the broker', integer)
  .requiredOption('--quarantine-window-ms <ms>', 'how long quarantined messages may still be replayed', integer)
  .option('--batch-size <n>', 'inbox rows per statement', integer, 1_000)
  .option('--max-batches <n>', 'stop after this many batches', integer)
  .option('--json', 'the counts as JSON')
  .action(async (options: { consumer: string; projection: string; olderThan: number; retryHorizonMs: number; quarantineWindowMs: number; batchSize: number; maxBatches?: number; json?: boolean }) => {
    const { databaseUrl, schema } = globalOptions();
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
    if (options.json) console.log(JSON.stringify(result));
    else console.log(`compacted ${result.compacted} inbox rows into ${result.watermarks} watermarks in ${result.batches} batches`);
  });

const outbox = program.command('outbox').description('inspect and retry outbox rows');

outbox
  .command('list')
  .description('outbox rows of one status, oldest first (default: failed), without payloads')
  .option('--failed', 'rows the relay gave up on (default)')
  .option('--pending', 'rows not yet published')
  .option('--limit <n>', 'most rows', integer, 100)
  .option('--json', 'one JSON document instead of a table')
  .action(async (options: { failed?: boolean; pending?: boolean; limit: number; json?: boolean }) => {
    const { databaseUrl, schema } = globalOptions();
    const status = options.pending && !options.failed ? 'pending' : 'failed';
    const rows = await withPool(databaseUrl, (pool) => listOutbox(pool, { schema, status, limit: options.limit }));
    console.log(options.json ? JSON.stringify(rows, null, 2) : outboxTable(rows));
  });

outbox
  .command('retry')
  .description('put failed events back in line, with their original eventIds')
  .option('--event-id <id>', 'only this event')
  .action(async (options: { eventId?: string }) => {
    const { databaseUrl, schema } = globalOptions();
    const ids = await withPool(databaseUrl, (pool) => retryFailedEvents(pool, { schema, ...(options.eventId ? { eventId: options.eventId } : {}) }));
    console.log(`requeued ${ids.length} event(s)`);
  });

const dlq = program.command('dlq').description('quarantined messages: list, show, replay, discard');

dlq
  .command('list')
  .description('open quarantined messages, newest first, without bodies; with --all also closed ones and what their replay did')
  .option('--consumer <name>', 'only this consumer (inbox scope)')
  .option('--reason <reason>', 'only this reason, e.g. handler-failed')
  .option('--event-type <type>', 'only this eventType')
  .option('--older-than <ms>', 'only messages at least this old', integer, 0)
  .option('--all', 'include replayed and discarded ones')
  .option('--limit <n>', 'most rows', integer, 100)
  .option('--json', 'one JSON document instead of a table')
  .action(async (options: { consumer?: string; reason?: string; eventType?: string; olderThan: number; all?: boolean; limit: number; json?: boolean }) => {
    const { databaseUrl, schema } = globalOptions();
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
  .description('one quarantined message with its properties (and with --body its raw body: it may hold personal data)')
  .option('--body', 'print the raw body too')
  .action(async (id: string, options: { body?: boolean }) => {
    const { databaseUrl, schema } = globalOptions();
    const message = await withPool(databaseUrl, (pool) => showQuarantined(pool, id, { schema: schema }));
    if (!message) throw new ConvergeError('CONVERGE_QUARANTINE_NOT_FOUND', `no quarantined message ${id}`);
    const { body, ...rest } = message;
    console.log(JSON.stringify({ ...rest, bodyBytes: body.length, ...(options.body ? { body: body.toString('utf8') } : {}) }, null, 2));
  });

dlq
  .command('replay <ids...>')
  .description("send quarantined messages back through the consumer's normal path (inbox, versions, conflicts)")
  .requiredOption('--queue <name>', 'the consumer queue to send them to')
  .option('--amqp-url <url>', AMQP_URL_HELP)
  .option('--note <text>', 'recorded with the replay')
  .action(async (ids: string[], options: { queue: string; amqpUrl?: string; note?: string }) => {
    const { databaseUrl, schema } = globalOptions();
    const connection = await amqp.connect(amqpUrl(options.amqpUrl), { noDelay: true });
    try {
      const channel = await connection.createConfirmChannel();
      await withPool(databaseUrl, async (pool) => {
        for (const id of ids) await replayQuarantined(pool, channel, { id, queue: options.queue, schema, ...(options.note ? { note: options.note } : {}) });
      });
      console.log(`replayed ${ids.length} message(s) to ${options.queue}`);
    } finally {
      await connection.close().catch(() => undefined);
    }
  });

dlq
  .command('discard <ids...>')
  .description('close quarantined messages without processing them; the reason is recorded')
  .requiredOption('--reason <text>', 'why (required, kept with the row)')
  .action(async (ids: string[], options: { reason: string }) => {
    const { databaseUrl, schema } = globalOptions();
    await withPool(databaseUrl, async (pool) => {
      for (const id of ids) await discardQuarantined(pool, { id, reason: options.reason, schema });
    });
    console.log(`discarded ${ids.length} message(s)`);
  });

program
  .command('retry-failed')
  .description('put failed outbox events back in line (same eventIds)')
  .option('--event-id <id>', 'only this event')
  .action(async (options: { eventId?: string }) => {
    const { databaseUrl, schema } = globalOptions();
    const ids = await withPool(databaseUrl, (pool) => retryFailedEvents(pool, { schema, ...(options.eventId ? { eventId: options.eventId } : {}) }));
    console.log(`requeued ${ids.length} event(s)`);
  });

function outboxTable(rows: OutboxRow[]): string {
  if (rows.length === 0) return 'no rows';
  return table(
    ['event_id', 'aggregate', 'version', 'type', 'attempts', 'last_error', 'age'],
    rows.map((r) => [r.eventId, `${r.aggregateType}/${r.aggregateId}`, String(r.aggregateVersion), r.eventType, String(r.attempts), r.lastError ?? '', `${r.ageSeconds.toFixed(0)} s`]),
  );
}

function quarantineTable(rows: QuarantineSummary[]): string {
  if (rows.length === 0) return 'nothing quarantined';
  return table(
    ['id', 'consumer', 'event_id', 'reason', 'age', 'resolution', 'replay_outcome', 'detail'],
    rows.map((r) => [r.id, r.consumer, r.eventId ?? '', r.reason, `${r.ageSeconds.toFixed(0)} s`, r.resolution ?? '', replayOutcomeCell(r), r.detail.length > 60 ? `${r.detail.slice(0, 57)}...` : r.detail]),
  );
}

/** A failed replay points at the row it landed in, which is the one to look at next. */
function replayOutcomeCell(row: QuarantineSummary): string {
  if (row.replayOutcome === null) return row.resolution === 'replayed' ? '(pending)' : '';
  return row.replayQuarantineId === null ? row.replayOutcome : `${row.replayOutcome} -> ${row.replayQuarantineId}`;
}

function gapTable(gaps: Gap[]): string {
  if (gaps.length === 0) return 'no gaps';
  const header = ['consumer', 'projection', 'aggregate', 'current', 'missing', 'parked', 'oldest'];
  const rows = gaps.map((g) => [
    g.consumer,
    g.projection,
    `${g.aggregateType}/${g.aggregateId}`,
    String(g.currentVersion),
    String(g.missingVersion),
    g.parkedVersions.length > 5 ? `${g.parkedVersions.slice(0, 5).join(',')},… (${g.parkedVersions.length})` : g.parkedVersions.join(','),
    `${(g.ageMs / 1000).toFixed(1)} s`,
  ]);
  return table(header, rows);
}

program.parseAsync(process.argv).catch((err: unknown) => {
  // Only converge's own messages are printed in full: they never carry payloads or passwords.
  const message = err instanceof ConvergeError ? `${err.code}: ${err.message}` : `${(err as Error).name}: ${(err as { code?: string }).code ?? ''} ${(err as Error).message}`;
  console.error(`converge: ${message}`);
  process.exitCode = 1;
});
