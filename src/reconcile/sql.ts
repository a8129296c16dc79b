import { perSchema, type SchemaRef } from '../runtime/identifier.js';

/**
 * Repair statements on converge's projection_state, built once per schema; $1 projection,
 * $2 aggregate type, $3 aggregate id.
 */
export const reconcileSql = perSchema((schema: SchemaRef) => {
  const table = `${schema.quoted}.projection_state`;
  return {
    /** Repair: conditional on the version observed ($5) still being there and the source ($4) being newer. */
    repair: `UPDATE ${table} SET version = $4, baseline_version = $4, deleted = $6, updated_at = now()
              WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3
                AND version = $5 AND version < $4`,
    /** Repair of an aggregate the projection has never seen. */
    repairMissing: `INSERT INTO ${table} (projection, aggregate_type, aggregate_id, version, baseline_version, deleted)
                    VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT DO NOTHING`,
    /** A page of the projection's own view: $1 projection, $2 aggregate type, after id $3 (byte order), $4 rows. */
    targetPage: `SELECT aggregate_id AS id, version, deleted FROM ${table}
                  WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id COLLATE "C" > $3
                  ORDER BY aggregate_id COLLATE "C" LIMIT $4`,
    /** Forgets every version of one projection and aggregate type ($1, $2), for a rebuild. */
    forget: `DELETE FROM ${table} WHERE projection = $1 AND aggregate_type = $2`,
    /** Drops one aggregate's version row: the source confirmed the aggregate does not exist. */
    forgetOne: `DELETE FROM ${table} WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
    /** Locks one aggregate's version row for a same-version rewrite. */
    lockState: `SELECT version FROM ${table} WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3 FOR UPDATE`,
    setDeleted: `UPDATE ${table} SET deleted = $4, updated_at = now() WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
  };
});

/** Statements of a consistent source read (sourceSnapshot); schema-free, they run on the source's own database. */
export const snapshotSql = {
  /** First statement of the transaction: one snapshot for every later statement, and no writes. */
  repeatableReadOnly: 'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY',
  /** Makes the snapshot importable by other sessions while this transaction stays open. */
  exportSnapshot: 'SELECT pg_export_snapshot() AS id',
  /** SET TRANSACTION SNAPSHOT takes no parameters: the id is checked against SNAPSHOT_ID first. */
  importSnapshot: (id: string) => `SET TRANSACTION SNAPSHOT '${id}'`,
};

/** What pg_export_snapshot() returns (e.g. `00000003-0000001B-1`); nothing else reaches importSnapshot. */
export const SNAPSHOT_ID = /^[0-9A-F]{8}-[0-9A-F]{8}-[0-9]{1,10}$/;
