import type { Executor } from '../db/executor.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { readState, type ProjectionState } from '../projection/index.js';
import { reconcileSql } from './sql.js';

/** A full state read from the source of truth at a known version, in one consistent read. */
export interface TrustedSnapshot {
  projection: string;
  aggregateType: string;
  aggregateId: string;
  /** The source's version of the aggregate in this snapshot. */
  sourceVersion: number;
  /** True if the source no longer has the aggregate (the repair writes a versioned tombstone). */
  deleted?: boolean;
  /** The local version the reconciler saw when it decided to repair; null if it saw no local state. */
  observedVersion: number | null;
  schema?: string;
}

export type RepairResult =
  | { repaired: true; version: number }
  /**
   * Nothing written: `stale-observation` means the projection moved since it was observed
   * (re-read and compare again rather than replaying this repair); `not-newer` means the
   * projection already has the source version or a later one.
   */
  | { repaired: false; reason: 'stale-observation' | 'not-newer'; current: ProjectionState | null };

/**
 * Repairs one aggregate from a trusted full snapshot while normal consumption may run
 * concurrently. The write is conditional on the projection still being at the observed
 * version and on the source being newer, and it records the snapshot version as the
 * baseline watermark: late incremental events at or below it are then acknowledged
 * without effect instead of waiting forever for a gap that the snapshot already closed.
 * `apply` writes the read model on the same transaction and runs only if the repair won.
 */
export async function repairFromSnapshot(
  tx: Executor,
  snapshot: TrustedSnapshot,
  apply: () => Promise<void>,
): Promise<RepairResult> {
  return repairAt(tx, schemaRef(snapshot.schema ?? DEFAULT_SCHEMA), snapshot, apply);
}

/** repairFromSnapshot for converge's own callers, which hold a SchemaRef already (`snapshot.schema` is not read). */
export async function repairAt(
  tx: Executor,
  schema: SchemaRef,
  snapshot: Omit<TrustedSnapshot, 'schema'>,
  apply: () => Promise<void>,
): Promise<RepairResult> {
  const sql = reconcileSql(schema);
  const key = [snapshot.projection, snapshot.aggregateType, snapshot.aggregateId];
  const deleted = snapshot.deleted ?? false;
  const result =
    snapshot.observedVersion === null
      ? await tx.query(sql.repairMissing, [...key, snapshot.sourceVersion, deleted])
      : await tx.query(sql.repair, [...key, snapshot.sourceVersion, snapshot.observedVersion, deleted]);
  if (result.rowCount === 1) {
    await apply();
    return { repaired: true, version: snapshot.sourceVersion };
  }
  const current = await readState(tx, schema, {
    projection: snapshot.projection,
    aggregateType: snapshot.aggregateType,
    aggregateId: snapshot.aggregateId,
  });
  const stale = (current?.version ?? null) !== snapshot.observedVersion;
  return { repaired: false, reason: stale ? 'stale-observation' : 'not-newer', current };
}
