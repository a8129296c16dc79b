import type { Executor } from '../db/executor.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { StaleVersionError, VersionGapError, type AggregateKey } from '../runtime/errors.js';
import { checkWrite, type WriteResult } from './write.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { projectionSql, type StateRow } from './sql.js';
import { aggregateKey, consecutiveRuns, judgeIncrement, planIncrements } from './versions.js';
import { runStatement } from '../db/statement.js';
import { RetryTransactionSignal } from '../db/transaction.js';
import { projectionSchema, reportBlocked } from './guard.js';

type Versioned = Pick<EventEnvelope, 'aggregateType' | 'aggregateId' | 'aggregateVersion'>;

export interface ProjectionTarget<E extends Versioned = Versioned> {
  /** Name of the read model, e.g. `order_search`; versions are tracked per projection. */
  projection: string;
  /** The event being applied (its aggregate fields and version are used here); `apply` gets it back, typed. */
  event: E;
  /**
   * Schema holding converge's tables. Default: inside a consumer's handler, the consumer's (another
   * is refused with ConfigError); elsewhere `converge`.
   */
  schema?: string;
}

export type ApplyResult =
  { applied: true; version: number } | { applied: false; reason: 'covered-by-baseline' | 'not-newer'; version: number };

export interface ProjectionState {
  version: number;
  baselineVersion: number | null;
  deleted: boolean;
}

/**
 * Applies an incremental event only on top of exactly the previous version. The version
 * row moves first (and stays locked until commit), then `apply` writes the read model on
 * the same transaction. If the previous version is missing this throws VersionGapError
 * (StaleVersionError if the version is taken), which must roll back the whole consumer
 * transaction, inbox row included, so the event waits and is retried; it is never skipped.
 * An event at or below the baseline of a trusted snapshot returns `covered-by-baseline`
 * without calling `apply`.
 *
 * `apply` gets the event back (typed as given) and reports what it wrote (WriteResult): a
 * result changing no row throws NoRowsWrittenError, so an UPDATE that missed the row an
 * aggregate's first event should have created is never recorded as applied. Return
 * `'unchanged'` for an event that legitimately writes nothing.
 *
 * Inside a consumer handler, pass the context's `tx`: the verdict is also reported to the
 * consumer, which rolls back and parks (or retries) the event even if the handler catches
 * the error. Catching it cannot make a gap count as applied. See docs/consumer.md.
 */
export async function applyIncrement<E extends Versioned>(
  tx: Executor,
  target: ProjectionTarget<E>,
  apply: (event: E) => Promise<WriteResult>,
): Promise<ApplyResult> {
  const { sql, params, key } = prepare(tx, target);
  const version = target.event.aggregateVersion;
  // One statement on the happy path: the first version starts the row, any later one advances it.
  const moved =
    version === 1
      ? await runStatement(tx, sql.start, params)
      : await runStatement(tx, sql.advance, [...params, version]);
  if (moved.rowCount === 1) {
    checkWrite(tx, await apply(target.event), 1, target.projection, writtenFor(target.event));
    return { applied: true, version };
  }
  const current = toState((await runStatement<StateRow>(tx, sql.lock, params)).rows[0]);
  const verdict = judgeIncrement(version, current);
  if (verdict === 'covered-by-baseline')
    return { applied: false, reason: 'covered-by-baseline', version: current!.version };
  if (verdict === 'stale') throw reportBlocked(tx, new StaleVersionError(key, version, current!.version));
  throw reportBlocked(tx, new VersionGapError(key, version, current?.version ?? 0));
}

export interface SnapshotTarget<E extends Versioned = Versioned> extends ProjectionTarget<E> {
  /** The snapshot says the aggregate no longer exists; the tombstone is versioned like any state. */
  deleted?: boolean;
}

/**
 * Applies a full snapshot only if it is newer than what the projection has; the snapshot
 * version becomes the baseline watermark, so late incremental events it already contains
 * are acknowledged without effect. Not newer → `not-newer`, `apply` is not called. `apply`
 * reports what it wrote like applyIncrement's; a tombstone (`deleted`) may change no row (the
 * read model may never have had it).
 */
export async function applySnapshot<E extends Versioned>(
  tx: Executor,
  target: SnapshotTarget<E>,
  apply: (event: E) => Promise<WriteResult>,
): Promise<ApplyResult> {
  const { sql, params } = prepare(tx, target);
  const version = target.event.aggregateVersion;
  const deleted = target.deleted ?? false;
  const result = await runStatement(tx, sql.snapshot, [...params, version, deleted]);
  if (result.rowCount === 1) {
    checkWrite(tx, await apply(target.event), deleted ? 0 : 1, target.projection, writtenFor(target.event));
    return { applied: true, version };
  }
  const current = toState((await runStatement<StateRow>(tx, sql.read, params)).rows[0]);
  return { applied: false, reason: 'not-newer', version: current?.version ?? 0 };
}

/** Current applied version, baseline and tombstone flag of one aggregate in one projection; null if never applied. */
export async function readProjectionState(
  executor: Executor,
  key: AggregateKey & { schema?: string },
): Promise<ProjectionState | null> {
  return readState(executor, schemaRef(key.schema ?? DEFAULT_SCHEMA), key);
}

/** readProjectionState for converge's own callers, which hold a SchemaRef already. */
export async function readState(
  executor: Executor,
  schema: SchemaRef,
  key: AggregateKey,
): Promise<ProjectionState | null> {
  const { rows } = await runStatement<StateRow>(executor, projectionSql(schema).read, [
    key.projection,
    key.aggregateType,
    key.aggregateId,
  ]);
  return toState(rows[0]);
}

function writtenFor(event: Versioned) {
  return { aggregateType: event.aggregateType, aggregateId: event.aggregateId, version: event.aggregateVersion };
}

function prepare(tx: Executor, target: ProjectionTarget) {
  const sql = projectionSql(schemaRef(projectionSchema(tx, target.schema)));
  const key: AggregateKey = {
    projection: target.projection,
    aggregateType: target.event.aggregateType,
    aggregateId: target.event.aggregateId,
  };
  return { sql, key, params: [key.projection, key.aggregateType, key.aggregateId] as unknown[] };
}

function toState(row: StateRow | undefined): ProjectionState | null {
  if (!row) return null;
  return {
    version: Number(row.version),
    baselineVersion: row.baseline_version === null ? null : Number(row.baseline_version),
    deleted: row.deleted,
  };
}

export interface BatchTarget<E extends Versioned> {
  projection: string;
  events: readonly E[];
  /** As ProjectionTarget's: inside a consumer's handler, the consumer's schema. */
  schema?: string;
  /**
   * The fewest rows `apply` must change. `per-aggregate` (default): one per distinct aggregate
   * among the events it gets, right for a read model keyed by aggregate where every event writes.
   * `at-least-one`: for read models that fold several aggregates into one row, or batches where
   * some events write nothing. Either way, 0 rows throws unless `apply` returns `'unchanged'`.
   */
  expectRows?: 'per-aggregate' | 'at-least-one';
}

export interface BatchApplyResult<E> {
  /** Events whose effect was written, in version order per aggregate. */
  applied: E[];
  /** Events a trusted snapshot already contains: recorded, no effect. */
  covered: E[];
}

/**
 * The set-based form of applyIncrement for a batch of incremental events, with the same
 * rules per event: each must sit exactly on the previous version (earlier events of the
 * same batch count), or be covered by the baseline. When every aggregate's versions in the
 * batch are consecutive, one statement moves all aggregates that sit right below their run
 * (the common case: nothing else is needed). Whatever did not move is locked and planned in
 * memory; the first event that cannot apply throws VersionGapError / StaleVersionError
 * before `apply` runs. Some aggregates may already have moved by then, so the caller's
 * transaction must roll back whole: the consumer does, even when its batch handler catches
 * the error (the verdict is reported to it as by applyIncrement). `apply` is called once
 * with the events to write and must change at least `expectRows` rows (one per aggregate by
 * default), else NoRowsWrittenError.
 */
export async function applyIncrements<E extends Versioned>(
  tx: Executor,
  target: BatchTarget<E>,
  apply: (events: E[]) => Promise<WriteResult>,
): Promise<BatchApplyResult<E>> {
  const sql = projectionSql(schemaRef(projectionSchema(tx, target.schema)));
  if (target.events.length === 0) return { applied: [], covered: [] };
  let moved: E[] = [];
  let rest: readonly E[] = target.events;
  const runs = consecutiveRuns(target.events);
  if (runs) {
    const result = await runStatement<{ aggregate_type: string; aggregate_id: string }>(tx, sql.moveRuns, [
      target.projection,
      runs.map((r) => r.aggregateType),
      runs.map((r) => r.aggregateId),
      runs.map((r) => r.first),
      runs.map((r) => r.last),
    ]);
    const movedKeys = new Set(
      result.rows.map((row) => aggregateKey({ aggregateType: row.aggregate_type, aggregateId: row.aggregate_id })),
    );
    moved = runs.filter((r) => movedKeys.has(aggregateKey(r))).flatMap((r) => r.events);
    rest = runs.filter((r) => !movedKeys.has(aggregateKey(r))).flatMap((r) => r.events);
  }
  const plan = rest.length > 0 ? await planAndMove(tx, sql, target.projection, rest) : { apply: [], covered: [] };
  const applied = [...moved, ...plan.apply];
  if (applied.length > 0) {
    const aggregates = uniqueAggregates(applied).length;
    const expected = target.expectRows === 'at-least-one' ? 1 : aggregates;
    checkWrite(tx, await apply(applied), expected, target.projection, { aggregates, events: applied.length });
  }
  return { applied, covered: plan.covered };
}

/** Locks the state rows of `events`' aggregates, plans, throws on the first blocked event, then moves them. */
async function planAndMove<E extends Versioned>(
  tx: Executor,
  sql: ReturnType<typeof projectionSql>,
  projection: string,
  events: readonly E[],
): Promise<{ apply: E[]; covered: E[] }> {
  const keys = uniqueAggregates(events);
  const locked = await runStatement<StateRow & { aggregate_type: string; aggregate_id: string }>(tx, sql.lockMany, [
    projection,
    keys.map((k) => k.aggregateType),
    keys.map((k) => k.aggregateId),
  ]);
  const current = new Map(
    locked.rows.map((row) => [
      aggregateKey({ aggregateType: row.aggregate_type, aggregateId: row.aggregate_id }),
      toState(row)!,
    ]),
  );
  const plan = planIncrements(events, current);
  if (plan.blocked) {
    const { event, verdict, currentVersion } = plan.blocked;
    const key: AggregateKey = { projection, aggregateType: event.aggregateType, aggregateId: event.aggregateId };
    throw reportBlocked(
      tx,
      verdict === 'stale'
        ? new StaleVersionError(key, event.aggregateVersion, currentVersion)
        : new VersionGapError(key, event.aggregateVersion, currentVersion),
    );
  }
  const moved = keys.filter((k) => plan.finalVersions.has(aggregateKey(k)));
  const existing = moved.filter((k) => current.has(aggregateKey(k)));
  const fresh = moved.filter((k) => !current.has(aggregateKey(k)));
  if (existing.length > 0) {
    await runStatement(tx, sql.advanceMany, [
      projection,
      existing.map((k) => k.aggregateType),
      existing.map((k) => k.aggregateId),
      existing.map((k) => plan.finalVersions.get(aggregateKey(k))),
      existing.map((k) => current.get(aggregateKey(k))!.version),
    ]);
  }
  if (fresh.length > 0) {
    const started = await runStatement(tx, sql.startMany, [
      projection,
      fresh.map((k) => k.aggregateType),
      fresh.map((k) => k.aggregateId),
      fresh.map((k) => plan.finalVersions.get(aggregateKey(k))),
    ]);
    if ((started.rowCount ?? 0) !== fresh.length) {
      // Another transaction started one of these aggregates after our read: re-run from the top.
      throw reportBlocked(tx, new RetryTransactionSignal('concurrent first version of an aggregate'));
    }
  }
  return { apply: plan.apply, covered: plan.covered };
}

function uniqueAggregates(
  events: readonly Pick<EventEnvelope, 'aggregateType' | 'aggregateId'>[],
): { aggregateType: string; aggregateId: string }[] {
  const seen = new Map<string, { aggregateType: string; aggregateId: string }>();
  for (const event of events)
    seen.set(aggregateKey(event), { aggregateType: event.aggregateType, aggregateId: event.aggregateId });
  return [...seen.values()];
}
