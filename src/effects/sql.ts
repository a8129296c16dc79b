import { perSchema, type SchemaRef } from '../runtime/identifier.js';

const COLUMNS = `key, effect, event_id, status, result, error, attempts, first_called_at, last_called_at, completed_at`;

/** The effects table's statements, built once per schema. */
export const effectsSql = perSchema((schema: SchemaRef) => ({
  /**
   * Records a call about to be made, before it is made: a new key starts at attempt 1, a key
   * still pending (a crash or a retryable failure earlier) counts one more. A completed or failed
   * key is left as it is and returns no row, so that it is never called again.
   */
  begin: `
    INSERT INTO ${schema.quoted}.effects AS e (key, effect, event_id, status, attempts, first_called_at, last_called_at)
    VALUES ($1, $2, $3, 'pending', 1, now(), now())
    ON CONFLICT (key) DO UPDATE SET attempts = e.attempts + 1, last_called_at = now()
      WHERE e.status = 'pending'
    RETURNING ${COLUMNS}`,
  /** The outcome, once: a key already completed or failed (by a concurrent run) keeps its first outcome. */
  finish: `
    UPDATE ${schema.quoted}.effects
       SET status = $2, result = $3::jsonb, error = $4, completed_at = now()
     WHERE key = $1 AND status = 'pending'
    RETURNING ${COLUMNS}`,
  /** A retryable failure: the key stays pending, with what kind of error it was. */
  retryable: `UPDATE ${schema.quoted}.effects SET error = $2 WHERE key = $1 AND status = 'pending'`,
  read: `SELECT ${COLUMNS} FROM ${schema.quoted}.effects WHERE key = $1`,
  /** A person's decision after fixing the cause: the failed key may be called again (with the same key). */
  retryFailed: `
    UPDATE ${schema.quoted}.effects SET status = 'pending', error = NULL, completed_at = NULL
     WHERE key = $1 AND status = 'failed'
    RETURNING ${COLUMNS}`,
}));
