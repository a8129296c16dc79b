import type pg from 'pg';
import { z } from 'zod';
import { aggregateTypeOption, projectionNameOption } from '../runtime/option-fields.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { withTransaction } from '../db/transaction.js';
import {
  defineOptions,
  functionOption,
  parseOptions,
  poolOption,
  signalOption,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../runtime/options.js';
import { readState } from '../projection/index.js';

import { classify, DIFFERENCES, mergePages, type Difference, type ReconcileRow } from './compare.js';
import { repairAt } from './repair.js';
import { reconcileSql } from './sql.js';

/**
 * Returns up to `limit` rows with ids greater than `after` (null: from the start), sorted by
 * id in byte order (`ORDER BY id COLLATE "C"` in PostgreSQL). A shorter page is the last one.
 */
export type PagedReader = (after: string | null, limit: number) => Promise<ReconcileRow[]>;

export interface ReconcileProgress {
  scanned: number;
  differences: Record<Difference, number>;
  /** Rows compared per second so far. */
  rate: number;
  cursor: string | null;
}

export interface ReconcileReport {
  scanned: number;
  differences: Record<Difference, number>;
  samples: Record<Difference, string[]>;
  repaired: number;
  /** Repairs not written because the projection moved on meanwhile (re-compared, found current). */
  skipped: number;
  /** Last id compared: pass it as `after` to resume. */
  cursor: string | null;
  /** False if stopped by the signal before the end. */
  complete: boolean;
  durationMs: number;
}

const repairSchema = z.strictObject({
  apply: functionOption<(tx: pg.PoolClient, row: ReconcileRow) => Promise<void>>(
    '(tx: pg.PoolClient, row: ReconcileRow) => Promise<void>',
  ).describe('Writes one aggregate of the read model from its source row (removes it when `deleted`).'),
  lookup: functionOption<(id: string) => Promise<ReconcileRow | null>>('(id: string) => Promise<ReconcileRow | null>')
    .optional()
    .describe('Reads one id from the source; null when the source has no such aggregate.'),
  remove: functionOption<(tx: pg.PoolClient, id: string) => Promise<void>>(
    '(tx: pg.PoolClient, id: string) => Promise<void>',
  )
    .optional()
    .describe('Removes one aggregate from the read model, on the transaction that drops its version.'),
});

/** How reconcile writes what it repairs. */
export type ReconcileRepair = z.input<typeof repairSchema>;

/** Ids kept per difference class by default (rebuildProjection's report uses it too). */
export const SAMPLE_SIZE = 10;

/** Fields reconcile and rebuildProjection share. */
export const reconcileShape = {
  schema: schemaOption,
  projection: projectionNameOption.describe('Projection name, as in projection_state.'),
  aggregateType: aggregateTypeOption.describe('Aggregate type the projection holds.'),
  source: functionOption<PagedReader>('PagedReader').describe(
    'The source of truth: id, version, deleted flag (and key fields), one consistent read per page (snapshotPages when a page takes several statements).',
  ),
  pageSize: z.number().int().min(1).max(100_000).default(500).describe('Rows per page on each side.'),
  maxRowsPerSecond: z
    .number()
    .positive()
    .optional()
    .describe('Most source rows compared per second, so live consumers are not starved; unlimited when omitted.'),
  onProgress: functionOption<(progress: ReconcileProgress) => void>('(progress: ReconcileProgress) => void')
    .optional()
    .describe('Called after each page with rows scanned, differences, rate and cursor.'),
};

export const reconcileOptions = defineOptions(
  'reconcile',
  z.strictObject({
    ...reconcileShape,
    target: functionOption<PagedReader>('PagedReader')
      .optional()
      .describe("The projection's view; by default versions and tombstones from projection_state (no fields)."),
    after: z
      .string()
      .nullable()
      .optional()
      .describe("Resume after this id (a previous report's cursor); from the start when omitted or null."),
    sampleSize: z.number().int().min(0).default(SAMPLE_SIZE).describe('Ids kept per difference class in the report.'),
    repair: repairSchema
      .optional()
      .describe(
        'Repair while consumers run: missing and stale get the source row as a baseline snapshot, mismatch is rewritten ' +
          'at the same version; ahead is only reported; extra is removed only with lookup and remove, after a point read confirms it is gone.',
      ),
    signal: signalOption.optional().describe('Stops after the current page; the report then has complete: false.'),
  }),
);

export type ReconcileOptions = OptionsInput<typeof reconcileOptions>;
export type ResolvedReconcileOptions = OptionsOutput<typeof reconcileOptions>;

const emptyCounts = <T>(value: () => T) =>
  Object.fromEntries(DIFFERENCES.map((d) => [d, value()])) as Record<Difference, T>;

/**
 * Compares a projection with its source by keyset pagination over both, classifies every
 * difference (missing, stale, ahead, mismatch, extra) and optionally repairs it without ever
 * regressing what a live consumer writes meanwhile.
 */
export async function reconcile(pool: pg.Pool, input: ReconcileOptions): Promise<ReconcileReport> {
  parseOptions(poolOption, pool, 'pool');
  return runReconcile(pool, reconcileOptions.parse(input));
}

/** reconcile with options already validated (rebuildProjection validates its own, once). */
export async function runReconcile(pool: pg.Pool, options: ResolvedReconcileOptions): Promise<ReconcileReport> {
  const schema = schemaRef(options.schema);
  const sql = reconcileSql(schema);
  const { pageSize, sampleSize } = options;
  const target: PagedReader =
    options.target ??
    (async (after, limit) => {
      const { rows } = await pool.query<{ id: string; version: string; deleted: boolean }>(sql.targetPage, [
        options.projection,
        options.aggregateType,
        after ?? '',
        limit,
      ]);
      return rows.map((row) => ({ id: row.id, version: Number(row.version), deleted: row.deleted }));
    });
  const report: ReconcileReport = {
    scanned: 0,
    differences: emptyCounts(() => 0),
    samples: emptyCounts((): string[] => []),
    repaired: 0,
    skipped: 0,
    cursor: options.after ?? null,
    complete: false,
    durationMs: 0,
  };
  const started = performance.now();
  const repairer = options.repair
    ? new Repairer(pool, schema, options.projection, options.aggregateType, options.repair)
    : null;

  let sourceBuffer: ReconcileRow[] = [];
  let targetBuffer: ReconcileRow[] = [];
  let sourceAfter = report.cursor;
  let targetAfter = report.cursor;
  let sourceDone = false;
  let targetDone = false;
  while (!(sourceDone && targetDone && sourceBuffer.length === 0 && targetBuffer.length === 0)) {
    if (options.signal?.aborted) return finish(report, started, false);
    // Refill whichever side may hold ids that are not settled yet.
    if (!sourceDone && sourceBuffer.length < pageSize) {
      const page = await options.source(sourceAfter, pageSize);
      sourceBuffer = sourceBuffer.concat(page);
      sourceDone = page.length < pageSize;
      sourceAfter = page[page.length - 1]?.id ?? sourceAfter;
    }
    if (!targetDone && targetBuffer.length < pageSize) {
      const page = await target(targetAfter, pageSize);
      targetBuffer = targetBuffer.concat(page);
      targetDone = page.length < pageSize;
      targetAfter = page[page.length - 1]?.id ?? targetAfter;
    }
    const { pairs, sourceRest, targetRest } = mergePages(sourceBuffer, targetBuffer, sourceDone, targetDone);
    sourceBuffer = sourceRest;
    targetBuffer = targetRest;
    for (const [source, projected] of pairs) {
      const difference = classify(source, projected);
      report.scanned++;
      report.cursor = (source ?? projected)!.id;
      if (difference === null) continue;
      report.differences[difference]++;
      if (report.samples[difference].length < sampleSize) report.samples[difference].push(report.cursor);
      if (repairer) {
        const outcome = await repairer.repair(difference, source, projected);
        if (outcome === 'repaired') report.repaired++;
        else if (outcome === 'skipped') report.skipped++;
      }
    }
    const elapsed = (performance.now() - started) / 1000;
    options.onProgress?.({
      scanned: report.scanned,
      differences: { ...report.differences },
      rate: elapsed > 0 ? report.scanned / elapsed : 0,
      cursor: report.cursor,
    });
    await throttle(report.scanned, started, options.maxRowsPerSecond);
  }
  return finish(report, started, true);
}

function finish(report: ReconcileReport, started: number, complete: boolean): ReconcileReport {
  report.complete = complete;
  report.durationMs = Math.round(performance.now() - started);
  return report;
}

/** Sleeps just long enough to keep the average at or under the rate. */
async function throttle(scanned: number, started: number, maxRowsPerSecond: number | undefined): Promise<void> {
  if (!maxRowsPerSecond) return;
  const ahead = (scanned / maxRowsPerSecond) * 1000 - (performance.now() - started);
  if (ahead > 0) await new Promise((resolve) => setTimeout(resolve, ahead));
}

/** Repairs one difference at a time, each in its own short transaction, re-reading before it writes. */
class Repairer {
  readonly #sql: ReturnType<typeof reconcileSql>;

  constructor(
    readonly pool: pg.Pool,
    readonly schema: SchemaRef,
    readonly projection: string,
    readonly aggregateType: string,
    readonly hooks: ReconcileRepair,
  ) {
    this.#sql = reconcileSql(schema);
  }

  async repair(
    difference: Difference,
    source: ReconcileRow | undefined,
    projected: ReconcileRow | undefined,
  ): Promise<'repaired' | 'skipped' | 'reported'> {
    if (difference === 'missing' || difference === 'stale') return this.#toNewerVersion(source!);
    if (difference === 'mismatch') return this.#atSameVersion(source!, projected!.version);
    if (difference === 'extra') return this.#removeExtra(projected!);
    return 'reported';
  }

  /** Removes an extra row only once the source, asked for that id, confirms it does not exist. */
  async #removeExtra(projected: ReconcileRow): Promise<'repaired' | 'skipped' | 'reported'> {
    const { lookup, remove } = this.hooks;
    if (!lookup || !remove) return 'reported';
    const source = await lookup(projected.id);
    if (source) {
      // It exists after all (written between two pages): judge it like any other row.
      const difference = classify(source, projected);
      return difference === null ? 'skipped' : this.repair(difference, source, projected);
    }
    return withTransaction(this.pool, async (tx) => {
      const params = [this.projection, this.aggregateType, projected.id];
      const { rows } = await tx.query<{ version: string }>(this.#sql.lockState, params);
      if (rows.length > 0 && Number(rows[0]!.version) !== projected.version) return 'skipped';
      await tx.query(this.#sql.forgetOne, params);
      await remove(tx, projected.id);
      return 'repaired';
    });
  }

  /**
   * The conditional snapshot update: written only if the projection is still at the version
   * read inside this transaction and the source is newer. If a consumer moved it in between,
   * read and compare again instead of replaying a stale fix.
   */
  async #toNewerVersion(source: ReconcileRow): Promise<'repaired' | 'skipped'> {
    const key = {
      projection: this.projection,
      aggregateType: this.aggregateType,
      aggregateId: source.id,
    };
    for (;;) {
      const outcome = await withTransaction(this.pool, async (tx) => {
        const state = await readState(tx, this.schema, key);
        if ((state?.version ?? 0) >= source.version) return 'skipped' as const;
        const result = await repairAt(
          tx,
          this.schema,
          {
            ...key,
            sourceVersion: source.version,
            deleted: source.deleted ?? false,
            observedVersion: state?.version ?? null,
          },
          () => this.hooks.apply(tx, source),
        );
        if (result.repaired) return 'repaired' as const;
        return result.reason === 'not-newer' ? ('skipped' as const) : ('again' as const);
      });
      if (outcome !== 'again') return outcome;
    }
  }

  /** Rewrites the read model at the same version, under the version row's lock. */
  async #atSameVersion(source: ReconcileRow, version: number): Promise<'repaired' | 'skipped'> {
    return withTransaction(this.pool, async (tx) => {
      const params = [this.projection, this.aggregateType, source.id];
      const { rows } = await tx.query<{ version: string }>(this.#sql.lockState, params);
      if (rows.length === 0 || Number(rows[0]!.version) !== version) return 'skipped';
      await tx.query(this.#sql.setDeleted, [...params, source.deleted ?? false]);
      await this.hooks.apply(tx, source);
      return 'repaired';
    });
  }
}
