import { perSchema, type SchemaRef } from '../../runtime/identifier.js';

/**
 * What the CDC relay writes to the outbox. It claims nothing (the slot orders and hands out the
 * rows), so unlike the polling relay's statements these are not fenced by claimed_by; they touch
 * only rows still pending, so a row another tool marked meanwhile is left as it is.
 */
export const cdcSql = perSchema((schema: SchemaRef) => {
  const outbox = `${schema.quoted}.outbox`;
  return {
    /** $1 positions the broker confirmed. */
    markPublished: `
      UPDATE ${outbox}
         SET status = 'published', published_at = now(), claimed_by = NULL, claim_expires_at = NULL, last_error = NULL
       WHERE position = ANY($1::bigint[]) AND status = 'pending'
      RETURNING event_id`,

    /**
     * One stop of the stream at $1: a return counts as an attempt ($3), a nack or lost confirm as a
     * broker retry; the row is never failed for it, the stream retries it in order until it goes.
     */
    countRetry: `
      UPDATE ${outbox}
         SET attempts = attempts + CASE WHEN $3::boolean THEN 1 ELSE 0 END,
             broker_retries = broker_retries + CASE WHEN $3::boolean THEN 0 ELSE 1 END,
             last_error = $2
       WHERE position = $1 AND status = 'pending'
      RETURNING event_id, attempts, broker_retries`,

    /**
     * Of the rows a mark did not change ($1 positions, $2 the 32-bit ids of their transactions as
     * the stream sent them), those still to be marked. PostgreSQL sends a transaction through the
     * slot once its commit record is flushed, a moment before the committing backend makes it
     * visible, so a fast confirm can beat it: such a row is either still invisible (its transaction
     * is not in this snapshot) or became visible since the mark's own snapshot (still pending).
     * The full 64-bit id is the one below the snapshot's xmax with those low 32 bits. A row another
     * tool marked, or one missing from a visible transaction (deleted), is not waited for.
     */
    stillToMark: `
      WITH snap AS (
        SELECT pg_current_snapshot() AS snapshot, pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax
      )
      SELECT m.position::text AS position
        FROM unnest($1::bigint[], $2::bigint[]) AS m(position, xid), snap
       WHERE EXISTS (SELECT 1 FROM ${outbox} o WHERE o.position = m.position AND o.status = 'pending')
          OR (NOT EXISTS (SELECT 1 FROM ${outbox} o WHERE o.position = m.position)
              AND NOT pg_visible_in_snapshot(
                    (snap.xmax - ((snap.xmax % 4294967296 - m.xid + 4294967296) % 4294967296))::text::xid8,
                    snap.snapshot))`,

    /** A row no consumer could accept (EnvelopeValidationError): kept as failed with why, never published. */
    markUnencodable: `
      UPDATE ${outbox}
         SET status = 'failed', attempts = attempts + 1, last_error = $2
       WHERE position = $1 AND status = 'pending'
      RETURNING event_id, attempts, broker_retries`,

    /**
     * A row the table refused to mark (held.ts): failed with $2 naming the constraint. It was
     * published already; kept failed with why rather than pending for good (a retry republishes it).
     */
    markRefused: `
      UPDATE ${outbox}
         SET status = 'failed', last_error = $2, claimed_by = NULL, claim_expires_at = NULL
       WHERE position = $1 AND status = 'pending'
      RETURNING event_id`,
  };
});
