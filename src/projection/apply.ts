import type { Executor } from '../db/executor.js';
import { quoteIdentifier } from '../db/identifier.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { StaleVersionError, VersionGapError, type AggregateKey } from '../errors.js';
import { DEFAULT_SCHEMA } from '../schema/migrate.js';
import { projectionSql, type StateRow } from './sql.js';
import { judgeIncrement } from './versions.js';

export interface ProjectionTarget {
  /** Name of the read model, e.g. `order_search`; versions are tracked per projection. */
  projection: string;
  /** The event being applied (only its aggregate fields and version are used here). */
  event: Pick<EventEnvelope, 'aggregateType' | 'aggregateId' | 'aggregateVersion'>;
  /** Schema holding converge's tables. Default `converge`. */
  schema?: string;
}

export type ApplyResult =
  | { applied: true; version: number }
  | { applied: false; reason: 'covered-by-baseline' | 'not-newer'; version: number };

export interface ProjectionState {
  version: number;
  baselineVersion: number | null;
  deleted: boolean;
}

/**
 * Applies an incremental event only on top of exactly the previous version. The version
 * row moves first (and stays locked until commit), then `apply` writes the read model on
 * the same transaction. If the previous version is missing this throws VersionGapError,
 * which must roll back the whole consumer transaction, inbox row included, so the event
 * waits and is retried; it is never skipped. An event at or below the baseline of a
 * trusted snapshot returns `covered-by-baseline` without calling `apply`.
 */
export async function applyIncrement(tx: Executor, target: ProjectionTarget, apply: () => Promise<void>): Promise<ApplyResult> {
  const { sql, params, key } = prepare(target);
  const version = target.event.aggregateVersion;
  if ((await tx.query(sql.advance, [...params, version])).rowCount === 1) {
    await apply();
    return { applied: true, version };
  }
  if (version === 1 && (await tx.query(sql.start, params)).rowCount === 1) {
    await apply();
    return { applied: true, version };
  }
  const current = toState((await tx.query<StateRow>(sql.lock, params)).rows[0]);
  const verdict = judgeIncrement(version, current);
  if (verdict === 'covered-by-baseline') return { applied: false, reason: 'covered-by-baseline', version: current!.version };
  if (verdict === 'stale') throw new StaleVersionError(key, version, current!.version);
  throw new VersionGapError(key, version, current?.version ?? 0);
}

export interface SnapshotTarget extends ProjectionTarget {
  /** The snapshot says the aggregate no longer exists; the tombstone is versioned like any state. */
  deleted?: boolean;
}

/**
 * Applies a full snapshot only if it is newer than what the projection has; the snapshot
 * version becomes the baseline watermark, so late incremental events it already contains
 * are acknowledged without effect. Not newer → `not-newer`, `apply` is not called.
 */
export async function applySnapshot(tx: Executor, target: SnapshotTarget, apply: () => Promise<void>): Promise<ApplyResult> {
  const { sql, params } = prepare(target);
  const version = target.event.aggregateVersion;
  const result = await tx.query(sql.snapshot, [...params, version, target.deleted ?? false]);
  if (result.rowCount === 1) {
    await apply();
    return { applied: true, version };
  }
  const current = toState((await tx.query<StateRow>(sql.read, params)).rows[0]);
  return { applied: false, reason: 'not-newer', version: current?.version ?? 0 };
}

/** Current applied version, baseline and tombstone flag of one aggregate in one projection; null if never applied. */
export async function readProjectionState(
  executor: Executor,
  key: AggregateKey & { schema?: string },
): Promise<ProjectionState | null> {
  const sql = projectionSql(quoteIdentifier(key.schema ?? DEFAULT_SCHEMA));
  const { rows } = await executor.query<StateRow>(sql.read, [key.projection, key.aggregateType, key.aggregateId]);
  return toState(rows[0]);
}

function prepare(target: ProjectionTarget) {
  const sql = projectionSql(quoteIdentifier(target.schema ?? DEFAULT_SCHEMA));
  const key: AggregateKey = { projection: target.projection, aggregateType: target.event.aggregateType, aggregateId: target.event.aggregateId };
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
