import { perSchema, type SchemaRef } from '../runtime/identifier.js';

/**
 * Statements on `projection_state`, which holds the applied version (and the baseline
 * watermark of the last trusted full snapshot) of every aggregate in every projection.
 * $1 projection, $2 aggregate type, $3 aggregate id throughout.
 */
export const projectionSql = perSchema((schema: SchemaRef) => {
  const table = `${schema.quoted}.projection_state`;
  return {
    /** The fast path: only moves from exactly version $4 - 1 to $4. */
    advance: `UPDATE ${table} SET version = $4::bigint, updated_at = now()
               WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND version = $4::bigint - 1`,
    /** The very first event of an aggregate starts its row; a concurrent first insert loses cleanly. */
    start: `INSERT INTO ${table} (projection, aggregate_type, aggregate_id, version) VALUES ($1, $2, $3, 1)
            ON CONFLICT DO NOTHING`,
    /** Locks the row so the decision taken on it holds until commit. */
    lock: `SELECT version, baseline_version, deleted FROM ${table}
            WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3 FOR UPDATE`,
    read: `SELECT version, baseline_version, deleted FROM ${table}
            WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
    /**
     * One aggregate's freshness: the applied version and baseline (no row: nothing applied), the
     * newest outbox version of the aggregate, and the age of its oldest outbox event above the
     * applied version. Both outbox reads are probes of the (aggregate_type, aggregate_id,
     * aggregate_version) unique index.
     */
    freshness: `SELECT s.version, s.baseline_version, s.deleted,
                       (SELECT max(o.aggregate_version) FROM ${schema.quoted}.outbox o
                         WHERE o.aggregate_type = $2 AND o.aggregate_id = $3) AS outbox_version,
                       (SELECT EXTRACT(EPOCH FROM now() - min(o.occurred_at)) FROM ${schema.quoted}.outbox o
                         WHERE o.aggregate_type = $2 AND o.aggregate_id = $3
                           AND o.aggregate_version > coalesce(s.version, 0)) AS oldest_unapplied_age_seconds
                  FROM (VALUES (1)) AS one (x)
                  LEFT JOIN ${table} s ON s.projection = $1 AND s.aggregate_type = $2 AND s.aggregate_id = $3`,
    /** A snapshot replaces state only when newer, and becomes the baseline watermark. */
    snapshot: `INSERT INTO ${table} (projection, aggregate_type, aggregate_id, version, baseline_version, deleted)
               VALUES ($1, $2, $3, $4, $4, $5)
               ON CONFLICT (projection, aggregate_type, aggregate_id) DO UPDATE
                 SET version = EXCLUDED.version, baseline_version = EXCLUDED.version,
                     deleted = EXCLUDED.deleted, updated_at = now()
               WHERE ${table}.version < EXCLUDED.version`,
    /** Locks the state rows of every aggregate in a batch ($2 types, $3 ids). */
    lockMany: `SELECT s.aggregate_type, s.aggregate_id, s.version, s.baseline_version
                 FROM ${table} s
                 JOIN unnest($2::text[], $3::text[]) AS k(aggregate_type, aggregate_id)
                   ON s.aggregate_type = k.aggregate_type AND s.aggregate_id = k.aggregate_id
                WHERE s.projection = $1
                ORDER BY s.aggregate_type, s.aggregate_id
                  FOR UPDATE OF s`,
    /** Moves locked rows from the version read ($5) to the batch's final version ($4). */
    advanceMany: `UPDATE ${table} s SET version = k.version, updated_at = now()
                    FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS k(aggregate_type, aggregate_id, version, previous)
                   WHERE s.projection = $1 AND s.aggregate_type = k.aggregate_type AND s.aggregate_id = k.aggregate_id
                     AND s.version = k.previous`,
    /**
     * The batch fast path, one statement: every run ($2 types, $3 ids, $4 first, $5 last
     * versions) whose aggregate sits exactly on first - 1 moves to last; a run starting at 1
     * on an aggregate without a row starts it. Returns the aggregates that moved; the others
     * are left untouched for the full plan.
     *
     * Each run's row is found by one index probe (OFFSET 0 keeps the planner from merging the
     * probes into a join; the second, C-collated equality lets either key index answer it in
     * full) and moved by its row address. As a plain join on the key, the prepared plan read
     * every state row of the projection per batch, and with statistics taken while the table
     * was small it sometimes scanned the table once per run (700 µs of server CPU per event
     * instead of 10). A row another transaction moved meanwhile has a new address, so it is not
     * moved twice: it stays for the full plan, which locks it and judges it.
     */
    moveRuns: `WITH k AS (
                 SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS k(aggregate_type, aggregate_id, first_version, last_version)
               ), found AS (
                 SELECT f.tid, k.first_version, k.last_version
                   FROM k CROSS JOIN LATERAL (
                     SELECT s.ctid AS tid FROM ${table} s
                      WHERE s.projection = $1 AND s.aggregate_type = k.aggregate_type AND s.aggregate_id = k.aggregate_id
                        AND s.aggregate_id COLLATE "C" = k.aggregate_id COLLATE "C"
                     OFFSET 0) f
               ), advanced AS (
                 UPDATE ${table} s SET version = found.last_version, updated_at = now()
                   FROM found
                  WHERE s.ctid = found.tid AND s.version = found.first_version - 1
                 RETURNING s.aggregate_type, s.aggregate_id
               ), started AS (
                 INSERT INTO ${table} (projection, aggregate_type, aggregate_id, version)
                 SELECT $1, k.aggregate_type, k.aggregate_id, k.last_version FROM k WHERE k.first_version = 1
                 ON CONFLICT DO NOTHING
                 RETURNING aggregate_type, aggregate_id
               )
               SELECT aggregate_type, aggregate_id FROM advanced
               UNION ALL
               SELECT aggregate_type, aggregate_id FROM started`,
    /** First versions of aggregates the projection has not seen; a concurrent first insert wins cleanly. */
    startMany: `INSERT INTO ${table} (projection, aggregate_type, aggregate_id, version)
                SELECT $1, k.aggregate_type, k.aggregate_id, k.version
                  FROM unnest($2::text[], $3::text[], $4::bigint[]) AS k(aggregate_type, aggregate_id, version)
                ON CONFLICT DO NOTHING`,
  };
});

export interface StateRow {
  version: string;
  baseline_version: string | null;
  deleted: boolean;
}
