import pg from 'pg';
import { ConfigError } from '../runtime/errors.js';
import { rebuildProjection, reconcile, DIFFERENCES, type PagedReader, type ReconcileProgress, type ReconcileReport, type ReconcileRow } from '../reconcile/index.js';

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

/** A page query given as text: `$1` the id to start after ('' at the start), `$2` the page size. */
export function sqlReader(pool: pg.Pool, text: string): PagedReader {
  return async (after, limit) => {
    const { rows } = await pool.query<Record<string, unknown>>(text, [after ?? '', limit]);
    return rows.map(toRow);
  };
}

function toRow(raw: Record<string, unknown>): ReconcileRow {
  const { id, version, deleted, ...fields } = raw;
  if (id === undefined || version === undefined) throw new ConfigError('source-sql', 'the page query must return the columns id and version');
  return { id: String(id), version: Number(version), deleted: deleted === true, ...(Object.keys(fields).length > 0 ? { fields } : {}) };
}

/** The projection database's pool and the source's (the same pool when no source URL is given), closed after `work`. */
async function withPools<T>(databaseUrl: string, sourceUrl: string | undefined, work: (pool: pg.Pool, sourcePool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2, application_name: 'converge-reconcile' });
  const sourcePool = sourceUrl ? new pg.Pool({ connectionString: sourceUrl, max: 1, application_name: 'converge-reconcile' }) : pool;
  try {
    return await work(pool, sourcePool);
  } finally {
    if (sourcePool !== pool) await sourcePool.end();
    await pool.end();
  }
}

/** Runs `converge reconcile`; the exit code is 4 while differences remain unrepaired. */
export async function reconcileCommand(databaseUrl: string, schema: string, options: ReconcileCliOptions): Promise<number> {
  if (options.repair && !options.applySql) throw new ConfigError('apply-sql', '--repair needs --apply-sql to write the read model');
  return withPools(databaseUrl, options.sourceDatabaseUrl, async (pool, sourcePool) => {
    const total = options.countSql ? Number((await sourcePool.query<{ count: string }>(options.countSql)).rows[0]?.count ?? 0) : null;
    const progress = process.stderr.isTTY ? progressLine(total) : undefined;
    const report = await reconcile(pool, {
      schema,
      projection: options.projection,
      aggregateType: options.aggregateType,
      source: sqlReader(sourcePool, options.sourceSql),
      ...(options.targetSql ? { target: sqlReader(pool, options.targetSql) } : {}),
      pageSize: options.pageSize,
      after: options.after ?? null,
      sampleSize: options.sample,
      ...(options.maxRate ? { maxRowsPerSecond: options.maxRate } : {}),
      ...(options.repair ? { repair: { apply: applyStatement(options.applySql!), ...extraRemoval(sourcePool, options) } } : {}),
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
  const lookupSql = options.lookupSql;
  const removeSql = options.removeSql;
  return {
    lookup: async (id: string) => {
      const { rows } = await sourcePool.query<Record<string, unknown>>(lookupSql, [id]);
      return rows[0] ? toRow(rows[0]) : null;
    },
    remove: async (tx: pg.PoolClient, id: string) => void (await tx.query(removeSql, [id])),
  };
}

/**
 * The user's write statement with its four parameters typed up front (a statement that does
 * not use all four would otherwise fail with "could not determine data type"); the row is
 * also available as the CTE `converge_row (id, version, fields, deleted)`.
 */
export function applyStatement(applySql: string): (tx: pg.PoolClient, row: ReconcileRow) => Promise<void> {
  const typed = 'converge_row (id, version, fields, deleted) AS (SELECT $1::text, $2::bigint, $3::jsonb, $4::boolean)';
  const leadingWith = /^\s*with\s+(recursive\s+)?/i.exec(applySql);
  const text = leadingWith ? `WITH ${leadingWith[1] ?? ''}${typed}, ${applySql.slice(leadingWith[0].length)}` : `WITH ${typed} ${applySql}`;
  return async (tx, row) => {
    await tx.query(text, [row.id, row.version, JSON.stringify(row.fields ?? {}), row.deleted ?? false]);
  };
}

/** One rewritten stderr line: rows, rate, differences and, with a known total, the ETA. */
function progressLine(total: number | null): (p: ReconcileProgress) => void {
  return (p) => {
    const found = DIFFERENCES.reduce((sum, d) => sum + p.differences[d], 0);
    const eta = total && p.rate > 0 ? `  ETA ${formatSeconds(Math.max(0, total - p.scanned) / p.rate)}` : '';
    const share = total ? ` / ${total.toLocaleString('en-US')}` : '';
    process.stderr.write(`\rreconcile  ${p.scanned.toLocaleString('en-US')}${share} rows  ${Math.round(p.rate).toLocaleString('en-US')} rows/s  ${found} differences${eta}   `);
  };
}

function formatSeconds(seconds: number): string {
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

function reportTable(report: ReconcileReport): string {
  const lines = [`scanned ${report.scanned} rows in ${(report.durationMs / 1000).toFixed(1)} s${report.complete ? '' : ' (stopped early)'}; cursor ${report.cursor ?? '-'}`, ''];
  lines.push('difference  count  sample');
  for (const d of DIFFERENCES) lines.push(`${d.padEnd(10)}  ${String(report.differences[d]).padStart(5)}  ${report.samples[d].join(', ')}`.trimEnd());
  lines.push('', `repaired ${report.repaired}, skipped ${report.skipped} (moved on meanwhile)`);
  return lines.join('\n');
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
export async function rebuildCommand(databaseUrl: string, schema: string, options: RebuildCliOptions): Promise<number> {
  return withPools(databaseUrl, options.sourceDatabaseUrl, async (pool, sourcePool) => {
    const progress = process.stderr.isTTY ? progressLine(null) : undefined;
    const report = await rebuildProjection(pool, {
      schema,
      projection: options.projection,
      aggregateType: options.aggregateType,
      source: sqlReader(sourcePool, options.sourceSql),
      reset: async (tx) => void (await tx.query(options.resetSql)),
      apply: applyStatement(options.applySql),
      pageSize: options.pageSize,
      ...(options.maxRate ? { maxRowsPerSecond: options.maxRate } : {}),
      ...(progress ? { onProgress: progress } : {}),
    });
    if (progress) process.stderr.write('\n');
    console.log(options.json ? JSON.stringify(report, null, 2) : `rebuilt ${options.projection}: ${report.repaired} aggregates written from the source in ${(report.durationMs / 1000).toFixed(1)} s`);
    return 0;
  });
}
