import { InvalidArgumentError, Option, type Command } from 'commander';
import type pg from 'pg';
import type { Finding } from '../../ops/index.js';
import {
  pipelineStatusOptions,
  readPipelineStatus,
  type PipelineStatus,
  type SourceTable,
  type WatchedQueue,
} from '../../ops/index.js';
import { formatBytes } from '../../runtime/bytes.js';
import { duration, withPool, type CommandContext } from '../context.js';
import { amqpUrl, LOCAL_AMQP_URL, schemaDefault } from '../env.js';
import { rate, seconds, table } from '../format.js';
import { tenantStatus } from './status-tenants.js';

export interface StatusCliOptions {
  source: SourceTable[];
  queue: WatchedQueue[];
  amqpUrl?: string;
  windowMs: number;
  sampleMs: number;
  stallAfterMs: number;
  sourceLookbackMs: number;
  cdcSlot: string[];
  cdcWalWarnBytes: number;
  horizonWarnAfterMs: number;
  lagBudget: Record<string, number>;
  json?: boolean;
}

const statusDefault = (key: string) => schemaDefault<number>(pipelineStatusOptions, key);

/** `status`: each stage of the pipeline from durable progress. */
export function registerStatus(program: Command, context: CommandContext): void {
  program
    .command('status')
    .description(
      'where the pipeline stalls: each stage from durable progress, rates, drain time, lag and permanent failures (exit 2 while stalled)',
    )
    .option(
      '--source <spec>',
      'a business table to check for changes without an outbox event: table=public.orders,type=order[,id=id][,version=version][,changed-at=updated_at] (repeatable)',
      parseSource,
      [],
    )
    .addOption(queueOption('a queue to watch: name[,consumer=inbox scope][,projection=name] (repeatable)'))
    .option(
      '--amqp-url <url>',
      `RabbitMQ URL for queue depths (default: env AMQP_URL, else ${LOCAL_AMQP_URL}, said on stderr)`,
    )
    .option('--window-ms <ms>', 'lag and projection activity over this window', duration, statusDefault('windowMs'))
    .option(
      '--sample-ms <ms>',
      'rates from two samples this far apart (0: one reading, no rates)',
      duration,
      statusDefault('sampleMs'),
    )
    .addOption(stallAfterOption(statusDefault('stallAfterMs')))
    .option(
      '--source-lookback-ms <ms>',
      'with changed-at: source rows changed this recently are checked',
      duration,
      statusDefault('sourceLookbackMs'),
    )
    .option(
      '--cdc-slot <name>',
      "a CDC relay's replication slot to check: exists, streamed from, WAL retained (repeatable)",
      (value: string, previous: string[]) => [...previous, value],
      [],
    )
    .option(
      '--cdc-wal-warn-bytes <bytes>',
      'a slot retaining this much WAL is a warning even while a relay streams from it',
      byteCount,
      statusDefault('cdcRetainedWalWarnBytes'),
    )
    .option(
      '--horizon-warn-after-ms <ms>',
      "a transaction, prepared transaction or inactive replication slot holding back vacuum's xmin horizon this long is a warning",
      duration,
      statusDefault('horizonWarnAfterMs'),
    )
    .option(
      '--lag-budget <name=duration>',
      'acceptable end-to-end lag of a projection (named on a --queue) or consumer, e.g. search=5s: a p99 over it is a warning (repeatable)',
      parseLagBudget,
      {},
    )
    .option('--json', 'one JSON document instead of the table')
    .action(async (options: StatusCliOptions) => {
      const { databaseUrl, schema, schemas, poolMode } = context.globals({ several: true });
      if (schemas.length > 1) {
        const read = (pool: pg.Pool, name: string) => pipelineStatusOf(pool, name, options);
        const stalled = await tenantStatus({ databaseUrl, poolMode }, schemas, {
          read,
          format: formatStatus,
          json: options.json === true,
        });
        process.exitCode = stalled ? 2 : 0;
        return;
      }
      process.exitCode = await withPool({ databaseUrl, schema, poolMode }, (pool) =>
        statusCommand(pool, schema, options),
      );
    });
}

/** Exit code 2 while any stage is stalled, so a cron job or a probe can alert on it. */
export async function statusCommand(pool: pg.Pool, schema: string, options: StatusCliOptions): Promise<number> {
  const status = await pipelineStatusOf(pool, schema, options);
  console.log(options.json ? JSON.stringify(status, null, 2) : formatStatus(status));
  return status.stalled ? 2 : 0;
}

/** The pipeline status of one schema, as the flags ask for it. */
export function pipelineStatusOf(pool: pg.Pool, schema: string, options: StatusCliOptions): Promise<PipelineStatus> {
  return readPipelineStatus(pool, {
    schema,
    sources: options.source,
    queues: options.queue,
    amqpUrl: amqpUrl(options.amqpUrl),
    windowMs: options.windowMs,
    sampleMs: options.sampleMs,
    stallAfterMs: options.stallAfterMs,
    sourceLookbackMs: options.sourceLookbackMs,
    cdcSlots: options.cdcSlot,
    cdcRetainedWalWarnBytes: options.cdcWalWarnBytes,
    horizonWarnAfterMs: options.horizonWarnAfterMs,
    lagBudgets: options.lagBudget,
  });
}

function byteCount(value: string): number {
  const bytes = Number(value);
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new InvalidArgumentError('a whole number of bytes');
  return bytes;
}

/** `table=public.orders,type=order[,id=id][,version=version][,changed-at=updated_at]`, repeatable. */
export function parseSource(value: string, previous: SourceTable[] = []): SourceTable[] {
  const fields = keyValues(value, ['table', 'type', 'id', 'version', 'changed-at']);
  if (!fields.table || !fields.type) throw new InvalidArgumentError('needs table=… and type=…');
  const source: SourceTable = { table: fields.table, aggregateType: fields.type };
  if (fields.id) source.idColumn = fields.id;
  if (fields.version) source.versionColumn = fields.version;
  if (fields['changed-at']) source.changedAtColumn = fields['changed-at'];
  return [...previous, source];
}

/** `search=5s`: a projection or consumer name and a duration, repeatable. */
export function parseLagBudget(value: string, previous: Record<string, number> = {}): Record<string, number> {
  const at = value.lastIndexOf('=');
  const name = value.slice(0, at).trim();
  if (at <= 0 || !name) throw new InvalidArgumentError('expected name=duration, e.g. search=5s');
  const ms = duration(value.slice(at + 1));
  if (ms < 1) throw new InvalidArgumentError('a lag budget must be at least 1 ms');
  return { ...previous, [name]: ms };
}

/** `--queue`, repeatable, as `status` and `dashboard` both take it; `help` says what the command does with it. */
export function queueOption(help: string): Option {
  return new Option('--queue <spec>', help).argParser(parseQueue).default([]);
}

/** `--stall-after-ms`: one threshold, one help, for `status` and `dashboard`. */
export function stallAfterOption(defaultMs: number): Option {
  return new Option('--stall-after-ms <ms>', 'pending events and missing versions older than this are stalls')
    .argParser(duration)
    .default(defaultMs);
}

/** `name` or `name,consumer=search,projection=order_search`, repeatable. */
export function parseQueue(value: string, previous: WatchedQueue[] = []): WatchedQueue[] {
  const [name, ...rest] = value.split(',');
  if (!name) throw new InvalidArgumentError('needs a queue name');
  const fields = keyValues(rest.join(','), ['consumer', 'projection']);
  return [
    ...previous,
    {
      queue: name,
      ...(fields.consumer ? { consumer: fields.consumer } : {}),
      ...(fields.projection ? { projection: fields.projection } : {}),
    },
  ];
}

function keyValues(value: string, allowed: string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const part of value.split(',').filter(Boolean)) {
    const [key, ...rest] = part.split('=');
    if (!key || !allowed.includes(key) || rest.length === 0)
      throw new InvalidArgumentError(`expected ${allowed.map((k) => `${k}=…`).join(',')}`);
    fields[key] = rest.join('=');
  }
  return fields;
}

export function formatStatus(status: PipelineStatus): string {
  const checks = checkRows(status);
  const sections = [
    `converge status at ${status.checkedAt}: ${status.sampleSeconds > 0 ? `rates over ${status.sampleSeconds} s` : 'no rates (--sample-ms 5s samples them)'}, lag over ${status.windowSeconds} s, stall after ${status.stallAfterSeconds} s`,
    table(['stage', 'check', 'state', 'evidence'], checks),
    table(
      ['backlog', 'arrival', 'completion', 'pending', 'drain'],
      [
        [
          'outbox → broker',
          rate(status.outbox.throughput.arrivalPerSecond),
          rate(status.outbox.throughput.completionPerSecond),
          String(status.outbox.pending),
          drain(status.outbox.throughput.drainSeconds),
        ],
        ...status.queues.map((q) => [
          `queue ${q.queue}`,
          rate(q.throughput.arrivalPerSecond),
          rate(q.throughput.completionPerSecond),
          q.depth === null ? '-' : String(q.depth),
          q.depth === null ? '-' : drain(q.throughput.drainSeconds),
        ]),
      ],
    ),
    ...failedReasonsTable(status.outbox.failedReasons),
    status.lag.length === 0
      ? `lag: no event recorded in the last ${status.windowSeconds} s`
      : table(
          ['lag (occurredAt → inbox)', 'events', 'p50', 'p99', 'max'],
          status.lag.map((l) => [
            l.consumer,
            String(l.events),
            seconds(l.p50Seconds),
            seconds(l.p99Seconds),
            seconds(l.maxSeconds),
          ]),
        ),
    status.findings.length === 0 ? 'no stall found' : status.findings.map(describeFinding).join('\n\n'),
  ];
  return sections.join('\n\n');
}

/** Why outbox rows failed, so an operator sees which rule to fix before `converge outbox retry`. */
function failedReasonsTable(reasons: Record<string, number>): string[] {
  const rows = Object.entries(reasons).map(([reason, n]) => [String(n), reason]);
  return rows.length === 0 ? [] : [table(['failed events', 'reason (last_error)'], rows)];
}

function checkRows(status: PipelineStatus): string[][] {
  const state = (match: (f: Finding) => boolean) => status.findings.find(match)?.severity.toUpperCase() ?? 'ok';
  return [
    ...status.sources.map((s) => [
      'producer',
      `${s.source} → outbox`,
      state((f) => f.kind === 'source-without-event' && f.subject === s.source),
      `${s.ahead} row(s) ahead of their outbox event`,
    ]),
    [
      'relay',
      'unpublished outbox',
      state((f) => f.kind === 'outbox-growing'),
      `${status.outbox.pending} pending, oldest ${seconds(status.outbox.oldestPendingAgeSeconds)}`,
    ],
    ['relay', 'failed events', state((f) => f.kind === 'outbox-failed'), String(status.outbox.failed)],
    ...status.cdcSlots.map((slot) => [
      'relay',
      `CDC slot ${slot.slot}`,
      state((f) => f.kind.startsWith('cdc-slot-') && f.subject === slot.slot),
      !slot.exists
        ? 'missing'
        : `${slot.active ? 'streamed from' : 'no relay streams'}, ${formatBytes(slot.retainedWalBytes)} WAL retained${slot.walStatus && slot.walStatus !== 'reserved' ? ` (${slot.walStatus})` : ''}`,
    ]),
    ...status.queues.flatMap((q) => {
      const rows = [
        [
          'consumer',
          `queue ${q.queue}`,
          state((f) => (f.kind === 'broker-backlog' || f.kind === 'queue-missing') && f.subject === q.queue),
          q.depth === null
            ? 'missing'
            : `${q.depth} ready, ${q.consumers} subscriber(s), ${rate(q.completedPerSecond)} recorded by ${q.consumer}`,
        ],
      ];
      if (q.projection)
        rows.push([
          'projection',
          `${q.consumer} → ${q.projection}`,
          state((f) => f.kind === 'inbox-without-projection' && f.subject === q.queue),
          `${q.inboxInWindow} inbox row(s), ${q.projectionUpdatesInWindow} projection change(s) in ${status.windowSeconds} s`,
        ]);
      return rows;
    }),
    ...status.lagBudgets.map((b) => [
      'projection',
      `lag budget ${b.name}`,
      state((f) => f.kind === 'lag-over-budget' && f.subject === b.name),
      b.p99Seconds === null
        ? `no event recorded by ${b.consumer} in ${status.windowSeconds} s; budget ${seconds(b.budgetSeconds)}`
        : `p99 ${seconds(b.p99Seconds)} over ${b.events} event(s), budget ${seconds(b.budgetSeconds)}`,
    ]),
    [
      'ordering',
      'missing versions',
      state((f) => f.kind === 'missing-versions'),
      `${status.gaps.stuckAggregates} stuck aggregate(s), ${status.gaps.parked} parked event(s)`,
    ],
    [
      'consumer',
      'quarantine',
      state((f) => f.kind === 'quarantined'),
      `${Object.values(status.failures.quarantined).reduce((a, b) => a + b, 0)} open`,
    ],
    [
      'consumer',
      'remote effects',
      state((f) => f.kind === 'effects-failed' || f.kind === 'effects-outcome-unknown'),
      `${status.failures.effects.failed} failed, ${status.failures.effects.stalePending} pending over ${seconds(status.stallAfterSeconds)}`,
    ],
    ['database', 'vacuum horizon', state((f) => f.kind === 'vacuum-horizon-held'), horizonDetail(status)],
    ...status.partitions.map((table) => [
      'database',
      `${table.table} partitions`,
      state((f) => f.kind === 'partitions-not-ahead' && f.subject === table.table),
      table.coveredUntilMs === null
        ? 'none covers now'
        : `${table.partitions} partitions, ready until ${seconds((table.coveredUntilMs - table.nowMs) / 1000)} from now`,
    ]),
  ];
}

function horizonDetail(status: PipelineStatus): string {
  const oldest = status.horizon.holders[0];
  if (!oldest) return 'nothing holds it back';
  const age = oldest.ageSeconds === null ? '' : `, for ${seconds(oldest.ageSeconds)}`;
  return `oldest: ${oldest.kind} ${oldest.holder}, ${oldest.transactionsBehind} transaction(s) behind${age}`;
}

function describeFinding(finding: Finding): string {
  return [
    `${finding.severity.toUpperCase()} ${finding.stage}: ${finding.kind}${finding.subject ? ` (${finding.subject})` : ''}`,
    `  evidence:  ${finding.evidence}`,
    `  look at:   ${finding.lookAt}`,
    `  recovered: ${finding.recovered}`,
  ].join('\n');
}

function drain(value: number | null): string {
  return value === null ? 'not draining' : seconds(value);
}
