import type pg from 'pg';
import { z } from 'zod';
import { defineOptions, functionOption } from '../runtime/options.js';
import { withTransaction } from '../db/transaction.js';
import type { Logger } from '../runtime/logger.js';
import { readGaps, type AggregateRef, type Gap } from '../inbox/index.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { readState } from '../projection/index.js';
import { repairAt } from './repair.js';

/** What the source of truth says about one aggregate, read consistently (one snapshot). */
export interface SourceSnapshot {
  version: number;
  /** The source says the aggregate is gone: the repair writes a versioned tombstone. */
  deleted?: boolean;
}

export const gapRepairOptions = defineOptions(
  'repairGaps',
  z.strictObject({
    olderThanMs: z.number().int().min(0).default(0).describe('Only gaps open at least this long, in ms.'),
    limit: z.number().int().min(1).default(100).describe('Most gaps repaired in one call, oldest first.'),
    loadSnapshot: functionOption<(gap: Gap) => Promise<SourceSnapshot | null>>(
      '(gap) => Promise<SourceSnapshot | null>',
    ).describe(
      'Reads the aggregate from the source. Null if the source cannot say (nothing is written: a deletion is never inferred from absence); `deleted: true` for a known deletion.',
    ),
    apply: functionOption<(tx: pg.PoolClient, snapshot: SourceSnapshot, gap: Gap) => Promise<void>>(
      '(tx, snapshot, gap) => Promise<void>',
    ).describe("Writes the read model from the snapshot on the repair's transaction; runs only if the repair wins."),
  }),
);

/** The schema's input, with the snapshot type the caller's source returns carried through to `apply`. */
export type GapRepairOptions<S extends SourceSnapshot> = Omit<
  z.input<typeof gapRepairOptions.schema>,
  'loadSnapshot' | 'apply'
> & {
  loadSnapshot: (gap: Gap) => Promise<S | null>;
  apply: (tx: pg.PoolClient, snapshot: S, gap: Gap) => Promise<void>;
};

export interface GapRepairReport {
  gaps: number;
  /** Projection moved to the source's version (baseline watermark set). */
  repaired: number;
  /** The projection already had the source's version or a later one. */
  notNewer: number;
  /** loadSnapshot returned null; the gap stays. */
  unknownAtSource: number;
  /** Parked events applied (or recorded as covered by the baseline) after the repairs. */
  drained: number;
}

/**
 * What gap repair needs of a consumer: its pool, inbox scope and schema, and a way to drain
 * one aggregate's reorder buffer. A Consumer and a DeliveryProcessor both have it.
 */
export interface GapRepairTarget {
  readonly pool: pg.Pool;
  readonly options: { readonly schema: string; readonly consumer: string; readonly logger: Logger };
  drainAggregate(aggregate: AggregateRef): Promise<number>;
}

/**
 * Repairs aggregates stuck on a missing version from the source: a conditional snapshot
 * write that sets the baseline watermark (never regressing what a live consumer wrote
 * meanwhile: on a lost race it re-reads and compares again), then drains the parked
 * events through the consumer. Those at or below the baseline are recorded in the inbox
 * without effect; the ones above apply in order. Late copies of covered events are acked
 * as done when they arrive.
 */
export async function repairGaps<S extends SourceSnapshot>(
  consumer: GapRepairTarget,
  options: GapRepairOptions<S>,
): Promise<GapRepairReport> {
  // The schema checks the callbacks are functions; the caller's typed ones are then used as given.
  const { olderThanMs, limit } = gapRepairOptions.parse(options);
  const { pool } = consumer;
  const { logger } = consumer.options;
  const schema = schemaRef(consumer.options.schema);
  const gaps = await readGaps(pool, {
    schema: schema.name,
    consumer: consumer.options.consumer,
    olderThanMs,
    limit,
  });
  const report: GapRepairReport = { gaps: gaps.length, repaired: 0, notNewer: 0, unknownAtSource: 0, drained: 0 };
  for (const gap of gaps) {
    const snapshot = await options.loadSnapshot(gap);
    if (snapshot === null) {
      report.unknownAtSource++;
      continue;
    }
    const outcome = await repairOne(pool, schema, gap, snapshot, options.apply);
    report[outcome]++;
    logger.info(
      {
        aggregateType: gap.aggregateType,
        aggregateId: gap.aggregateId,
        projection: gap.projection,
        sourceVersion: snapshot.version,
        outcome,
      },
      'gap repair',
    );
    report.drained += await consumer.drainAggregate(gap);
  }
  return report;
}

async function repairOne<S extends SourceSnapshot>(
  pool: pg.Pool,
  schema: SchemaRef,
  gap: Gap,
  snapshot: S,
  apply: GapRepairOptions<S>['apply'],
): Promise<'repaired' | 'notNewer'> {
  const key = { projection: gap.projection, aggregateType: gap.aggregateType, aggregateId: gap.aggregateId };
  for (;;) {
    const result = await withTransaction(pool, async (tx) => {
      const state = await readState(tx, schema, key);
      return repairAt(
        tx,
        schema,
        {
          ...key,
          sourceVersion: snapshot.version,
          deleted: snapshot.deleted ?? false,
          observedVersion: state?.version ?? null,
        },
        () => apply(tx, snapshot, gap),
      );
    });
    if (result.repaired) return 'repaired';
    if (result.reason === 'not-newer') return 'notNewer';
    // stale-observation: the live consumer moved the aggregate since it was read; compare again.
  }
}
