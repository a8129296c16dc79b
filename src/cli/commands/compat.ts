import type { Command } from 'commander';
import {
  checkCompat,
  compatOptions,
  findUnreadable,
  listRegistry,
  unreadableOptions,
  type CompatVerdict,
  type RegistryEntry,
  type UnreadableReport,
} from '../../ops/index.js';
import { parseAccepts } from '../../inbox/index.js';
import { ConfigError } from '../../runtime/errors.js';
import { duration, nonNegativeInteger, positiveInteger, withPool, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';
import { table } from '../format.js';

interface CompatCliOptions {
  eventType?: string;
  schemaVersion?: number;
  rollback?: boolean;
  accepts?: string;
  consumer?: string;
  liveWithin: number;
  sample: number;
  json?: boolean;
}

/** Exit code of a check that found something in the way (as `converge gaps`): scripts and CI gates test it. */
const FOUND = 3;

/**
 * `compat`: the schema registry consumers write when they subscribe. Three modes: list it; check
 * a version before a producer writes it; before a rollback, list what the older code cannot read.
 */
export function registerCompat(program: Command, context: CommandContext): void {
  program
    .command('compat')
    .description(
      'schema versions consumers read: without flags the registry; --event-type/--schema-version: may a producer write it (exit 3 if a live consumer cannot read it); --rollback: events waiting that older code cannot read (exit 3 if any)',
    )
    .option('--event-type <type>', 'the event type a producer is about to write')
    .option('--schema-version <n>', 'its schema version (--version is the program version)', positiveInteger)
    .option('--rollback', 'list events in the outbox, in flight and in quarantine that --accepts does not read')
    .option('--accepts <spec>', "with --rollback: what the older code reads, e.g. 'OrderPaid:1-2,OrderShipped:1'")
    .option('--consumer <name>', 'with --rollback: its consumer name (inbox scope)')
    .option(
      '--live-within <ms>',
      'a consumer is live while seen within this long (running ones refresh every minute)',
      duration,
      schemaDefault<number>(compatOptions, 'liveWithinMs'),
    )
    .option(
      '--sample <n>',
      'with --rollback: ids shown per type and version',
      nonNegativeInteger,
      schemaDefault<number>(unreadableOptions, 'sample'),
    )
    .option('--json', 'one JSON document instead of text')
    .action(async (options: CompatCliOptions) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      checkFlags(options);
      process.exitCode = await withPool({ databaseUrl, schema, poolMode }, async (pool) => {
        if (options.rollback) {
          const report = await findUnreadable(pool, {
            schema,
            accepts: options.accepts!,
            consumer: options.consumer!,
            sample: options.sample,
          });
          console.log(options.json ? JSON.stringify(report, null, 2) : unreadableText(report));
          return report.total > 0 ? FOUND : 0;
        }
        if (options.eventType !== undefined) {
          const verdict = await checkCompat(pool, {
            schema,
            eventType: options.eventType,
            schemaVersion: options.schemaVersion!,
            liveWithinMs: options.liveWithin,
          });
          console.log(options.json ? JSON.stringify(verdict, null, 2) : verdictText(verdict));
          return verdict.compatible ? 0 : FOUND;
        }
        const entries = await listRegistry(pool, { schema, liveWithinMs: options.liveWithin });
        console.log(options.json ? JSON.stringify(entries, null, 2) : registryText(entries));
        return 0;
      });
    });
}

/** The modes exclude each other; a half-given one is refused before anything connects. */
function checkFlags(options: CompatCliOptions): void {
  const problems: { path: string; message: string }[] = [];
  const check = options.eventType !== undefined || options.schemaVersion !== undefined;
  if (check && options.rollback)
    problems.push({ path: '--rollback', message: 'not with --event-type/--schema-version' });
  if (check && (options.eventType === undefined || options.schemaVersion === undefined))
    problems.push({ path: options.eventType === undefined ? '--event-type' : '--schema-version', message: 'required' });
  if (options.rollback) {
    if (options.accepts === undefined) problems.push({ path: '--accepts', message: 'required with --rollback' });
    if (options.consumer === undefined) problems.push({ path: '--consumer', message: 'required with --rollback' });
  } else {
    if (options.accepts !== undefined) problems.push({ path: '--accepts', message: 'only with --rollback' });
    if (options.consumer !== undefined) problems.push({ path: '--consumer', message: 'only with --rollback' });
  }
  if (problems.length > 0) throw new ConfigError(problems);
  if (options.accepts !== undefined) parseAccepts(options.accepts, '--accepts');
}

const ago = (at: Date) => `${Math.max(0, Math.round((Date.now() - at.getTime()) / 1000))} s ago`;

function registryText(entries: RegistryEntry[]): string {
  if (entries.length === 0) return 'no consumer has registered (consumers register when they subscribe)';
  const state = (e: RegistryEntry) => (e.running ? 'running' : e.stoppedAt ? 'stopped' : 'lost');
  return table(
    ['consumer', 'instance', 'state', 'last_seen', 'live', 'accepts'],
    entries.map((e) => [e.consumer, e.instance, state(e), ago(e.lastSeenAt), e.live ? 'yes' : 'no', e.accepts]),
  );
}

function verdictText(verdict: CompatVerdict): string {
  const subject = `${verdict.eventType} schemaVersion ${verdict.schemaVersion}`;
  const refusing = [...new Set(verdict.consumers.filter((c) => !c.reads).map((c) => c.consumer))];
  const lines = [
    verdict.consumers.length === 0
      ? `${subject}: compatible (no live consumer reads ${verdict.eventType})`
      : refusing.length === 0
        ? `${subject}: compatible, every live consumer reads it`
        : `${subject}: NOT compatible, not read by ${refusing.join(', ')}: roll them out first`,
  ];
  if (verdict.consumers.length > 0)
    lines.push(
      '',
      table(
        ['consumer', 'instance', 'reads', 'running', 'last_seen', 'accepts'],
        verdict.consumers.map((c) => [
          c.consumer,
          c.instance,
          c.reads ? 'yes' : 'no',
          c.running ? 'yes' : 'no',
          ago(c.lastSeenAt),
          c.accepts,
        ]),
      ),
    );
  for (const stale of verdict.stale)
    lines.push(`not counted (not seen within --live-within): ${stale.consumer}, last seen ${ago(stale.lastSeenAt)}`);
  return lines.join('\n');
}

function unreadableText(report: UnreadableReport): string {
  const head = `consumer ${report.consumer}, older code reads ${report.accepts}`;
  if (report.total === 0) return `${head}\nnothing waiting that it cannot read`;
  const places = [
    ['outbox', report.outbox],
    ['in flight', report.inFlight],
    ['quarantine', report.quarantine],
  ] as const;
  const rows = places.flatMap(([place, groups]) =>
    groups.map((g) => [place, g.eventType, String(g.schemaVersion), String(g.count), g.ids.join(' ')]),
  );
  return [
    head,
    `${report.total} event(s) waiting that it cannot read (ids: eventIds; in quarantine, quarantine ids):`,
    '',
    table(['where', 'event_type', 'version', 'count', 'ids'], rows),
    '',
    "in flight is derived from the outbox and this consumer's inbox, not read from the broker",
  ].join('\n');
}
