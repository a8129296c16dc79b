import type { Command } from 'commander';
import type pg from 'pg';
import type { Executor } from '../../db/executor.js';
import { databaseFailure, poolTarget } from '../../db/pool.js';
import { checkSchema } from '../../schema/migrate.js';
import { ConfigError } from '../../runtime/errors.js';
import {
  rebuildOptions,
  rebuildProjection,
  reconcile,
  reconcileOptions,
  DIFFERENCES,
  type ReconcileProgress,
  type ReconcileReport,
} from '../../reconcile/index.js';
import { nonNegativeInteger, openPool, positiveInteger, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';
import { applyStatement, sqlLookup, sqlReader } from '../sql-pages.js';

/** `reconcile` and `rebuild`: a projection compared with (and rebuilt from) its source, pages given as SQL text. */
export function registerReconcile(program: Command, context: CommandContext): void {
  program
    .command('reconcile')
    .description(
      'compare a projection with its source by keyset pages; report (and with --repair fix) every difference (exit 4 while differences remain unrepaired)',
    )
    .requiredOption('--projection <name>', 'projection name in projection_state')
    .requiredOption('--aggregate-type <type>', 'aggregate type of the rows compared')
    .requiredOption(
      '--source-sql <sql>',
      'page query on the source: $1 = after id (\'\' at the start), $2 = limit; returns id, version, [deleted], key fields; ORDER BY id COLLATE "C"',
    )
    .option('--source-database-url <url>', 'source database (default: the projection database)')
    .option(
      '--target-sql <sql>',
      'page query on the projection side, same shape (default: versions from projection_state)',
    )
    .option('--count-sql <sql>', 'count of source rows, for the ETA')
    .option('--page-size <n>', 'rows per page', positiveInteger, schemaDefault<number>(reconcileOptions, 'pageSize'))
    .option('--after <id>', 'resume after this id (the cursor of an earlier run)')
    .option('--max-rate <n>', 'most rows compared per second', positiveInteger)
    .option(
      '--sample <n>',
      'ids shown per difference',
      nonNegativeInteger,
      schemaDefault<number>(reconcileOptions, 'sampleSize'),
    )
    .option('--repair', 'repair missing, stale and mismatch rows (conditional, safe with live consumers)')
    .option(
      '--apply-sql <sql>',
      'with --repair: writes one row of the read model; $1 id, $2 version, $3 fields as jsonb, $4 deleted (also the CTE converge_row)',
    )
    .option(
      '--lookup-sql <sql>',
      'with --repair and --remove-sql: reads one source row by $1 id, to confirm an extra row is really gone',
    )
    .option('--remove-sql <sql>', 'with --repair and --lookup-sql: removes one read-model row by $1 id')
    .option('--json', 'one JSON document instead of a table')
    .action(async (options: ReconcileCliOptions) => {
      process.exitCode = await reconcileCommand(context.globals(), options);
    });

  program
    .command('rebuild')
    .description(
      'rebuild a lost or corrupted projection from the source: forget its versions, empty it, write every source row (stop its consumers first)',
    )
    .requiredOption('--projection <name>', 'projection name in projection_state')
    .requiredOption('--aggregate-type <type>', 'aggregate type to rebuild')
    .requiredOption(
      '--source-sql <sql>',
      'page query on the source (primary): $1 = after id, $2 = limit; returns id, version, [deleted], fields; ORDER BY id COLLATE "C"',
    )
    .requiredOption(
      '--apply-sql <sql>',
      'writes one row of the read model; $1 id, $2 version, $3 fields as jsonb, $4 deleted (also the CTE converge_row)',
    )
    .requiredOption(
      '--reset-sql <sql>',
      'empties the read model, on the transaction that forgets the versions (e.g. TRUNCATE order_search)',
    )
    .option('--source-database-url <url>', 'source database (default: the projection database)')
    .option('--page-size <n>', 'rows per page', positiveInteger, schemaDefault<number>(rebuildOptions, 'pageSize'))
    .option('--max-rate <n>', 'most rows written per second', positiveInteger)
    .option('--json', 'the report as JSON')
    .action(async (options: RebuildCliOptions) => {
      process.exitCode = await rebuildCommand(context.globals(), options);
    });
}

export interface ReconcileCliOptions {
  projection: string;
  aggregateType: string;
  sourceSql: string;
  sourceDatabaseUrl?: string;
  targetSql?: string;
  countSql?: string;
  pageSize: number;
  after?: string;
  maxRate?: number;
  sample: number;
  repair?: boolean;
  applySql?: string;
  lookupSql?: string;
  removeSql?: string;
  json?: boolean;
}

type Globals = ReturnType<CommandContext['globals']>;

/** The projection database's pool and the source's (the same pool when no source URL is given), closed after `work`. */
async function withPools<T>(
  { databaseUrl, schema, poolMode }: Globals,
  sourceUrl: string | undefined,
  work: (pool: pg.Pool, sourcePool: pg.Pool) => Promise<T>,
): Promise<T> {
  const pool = openPool(databaseUrl, 2, 'converge-reconcile', poolMode);
  const sourcePool = sourceUrl ? openPool(sourceUrl, 1, 'converge-reconcile') : pool;
  try {
    await checkSchema(pool, schema);
    return await work(pool, sourcePool);
  } catch (err) {
    // A SQL error of the caller's page queries stays as it is; only connection failures are classified.
    throw databaseFailure(err, poolTarget(pool));
  } finally {
    if (sourcePool !== pool) await sourcePool.end();
    await pool.end();
  }
}

/** Runs `converge reconcile`; the exit code is 4 while differences remain unrepaired. */
export async function reconcileCommand(globals: Globals, options: ReconcileCliOptions): Promise<number> {
  if (options.repair && !options.applySql)
    throw new ConfigError('apply-sql', '--repair needs --apply-sql to write the read model');
  return withPools(globals, options.sourceDatabaseUrl, async (pool, sourcePool) => {
    const total = options.countSql
      ? Number((await sourcePool.query<{ count: string }>(options.countSql)).rows[0]?.count ?? 0)
      : null;
    const progress = process.stderr.isTTY ? progressLine(total) : undefined;
    const report = await reconcile(pool, {
      ...projectionSource(globals.schema, options, sourcePool),
      ...(options.targetSql ? { target: sqlReader(pool, options.targetSql) } : {}),
      pageSize: options.pageSize,
      after: options.after ?? null,
      sampleSize: options.sample,
      ...(options.maxRate ? { maxRowsPerSecond: options.maxRate } : {}),
      ...(options.repair
        ? { repair: { apply: applyStatement(options.applySql!), ...extraRemoval(sourcePool, options) } }
        : {}),
      ...(progress ? { onProgress: progress } : {}),
    });
    if (progress) process.stderr.write('\n');
    console.log(options.json ? JSON.stringify(report, null, 2) : reportTable(report));
    const found = DIFFERENCES.reduce((sum, d) => sum + report.differences[d], 0);
    return found - report.repaired > 0 ? 4 : 0;
  });
}

/** `--lookup-sql` ($1 id) and `--remove-sql` ($1 id) together let --repair remove confirmed extras. */
function extraRemoval(sourcePool: pg.Pool, options: ReconcileCliOptions) {
  if (!options.lookupSql || !options.removeSql) return {};
  const removeSql = options.removeSql;
  return {
    lookup: sqlLookup(sourcePool, options.lookupSql),
    remove: async (tx: Executor, id: string) => void (await tx.query(removeSql, [id])),
  };
}

/** One rewritten stderr line: rows, rate, differences and, with a known total, the ETA. */
function progressLine(total: number | null): (p: ReconcileProgress) => void {
  return (p) => {
    const found = DIFFERENCES.reduce((sum, d) => sum + p.differences[d], 0);
    const eta = total && p.rate > 0 ? `  ETA ${formatSeconds(Math.max(0, total - p.scanned) / p.rate)}` : '';
    const share = total ? ` / ${total.toLocaleString('en-US')}` : '';
    process.stderr.write(
      `\rreconcile  ${p.scanned.toLocaleString('en-US')}${share} rows  ${Math.round(p.rate).toLocaleString('en-US')} rows/s  ${found} differences${eta}   `,
    );
  };
}

function formatSeconds(seconds: number): string {
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

function reportTable(report: ReconcileReport): string {
  const lines = [
    `scanned ${report.scanned} rows in ${(report.durationMs / 1000).toFixed(1)} s${report.complete ? '' : ' (stopped early)'}; cursor ${report.cursor ?? '-'}`,
    '',
  ];
  lines.push('difference  count  sample');
  for (const d of DIFFERENCES)
    lines.push(
      `${d.padEnd(10)}  ${String(report.differences[d]).padStart(5)}  ${report.samples[d].join(', ')}`.trimEnd(),
    );
  lines.push('', `repaired ${report.repaired}, skipped ${report.skipped} (moved on meanwhile)`);
  return lines.join('\n');
}

/** What reconcile and rebuild both read: one projection's aggregates, page by page from the source SQL. */
function projectionSource(
  schema: string,
  options: { projection: string; aggregateType: string; sourceSql: string },
  sourcePool: pg.Pool,
) {
  return {
    schema,
    projection: options.projection,
    aggregateType: options.aggregateType,
    source: sqlReader(sourcePool, options.sourceSql),
  };
}

export interface RebuildCliOptions {
  projection: string;
  aggregateType: string;
  sourceSql: string;
  sourceDatabaseUrl?: string;
  applySql: string;
  resetSql: string;
  pageSize: number;
  maxRate?: number;
  json?: boolean;
}

/** Runs `converge rebuild`: forget and empty, then write every source row at its version. */
export async function rebuildCommand(globals: Globals, options: RebuildCliOptions): Promise<number> {
  return withPools(globals, options.sourceDatabaseUrl, async (pool, sourcePool) => {
    const progress = process.stderr.isTTY ? progressLine(null) : undefined;
    const report = await rebuildProjection(pool, {
      ...projectionSource(globals.schema, options, sourcePool),
      reset: async (tx) => void (await tx.query(options.resetSql)),
      apply: applyStatement(options.applySql),
      pageSize: options.pageSize,
      ...(options.maxRate ? { maxRowsPerSecond: options.maxRate } : {}),
      ...(progress ? { onProgress: progress } : {}),
    });
    if (progress) process.stderr.write('\n');
    console.log(
      options.json
        ? JSON.stringify(report, null, 2)
        : `rebuilt ${options.projection}: ${report.repaired} aggregates written from the source in ${(report.durationMs / 1000).toFixed(1)} s`,
    );
    return 0;
  });
}
