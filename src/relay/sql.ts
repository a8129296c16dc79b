import { perSchema, type SchemaRef } from '../runtime/identifier.js';

/**
 * Every statement that claims or marks outbox rows for publishing, built once per schema: the
 * polling relay's (relaySql) and the CDC relay's (cdcSql; its slot's own SQL is cdc/slot-sql.ts).
 *
 * The polling relay's writes after the claim are fenced by `claimed_by IS NOT DISTINCT FROM
 * $owner`: a relay whose lease expired and was re-claimed by another cannot mark or reschedule
 * rows it no longer owns. An exclusive relay writes no claim, so its owner is NULL: it touches
 * only rows no lease relay holds.
 */
/**
 * The relay lock's key ($1 the schema's name): the schema's oid, unique in its database as
 * advisory locks are, where a hash of the name could let two schemas share one lock.
 */
const RELAY_LOCK = `hashtext('converge.relay'), to_regnamespace($1)::oid::int4`;

/** What a claim returns of each row (ClaimedRow). */
const CLAIMED_COLUMNS = `o.position, o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
       o.schema_version, o.kind, o.payload, o.occurred_at, o.traceparent, o.tenant_id, o.sensitive_fields, o.attempts, o.broker_retries`;

export const relaySql = perSchema((schema: SchemaRef) => {
  const outbox = `${schema.quoted}.outbox`;
  /**
   * Due, not under another relay's lease, and the earliest unpublished event of its aggregate: the
   * condition both claims share, so a retrying (or failed) event holds back only its own aggregate.
   * Only the immediate predecessor (the greatest lower version) is looked at: a version is claimed
   * only once its predecessor is published, so a published predecessor means every earlier version
   * is. One backward probe of the unique index, where checking every earlier version visited the
   * entries of all of them, kept by a long transaction holding vacuum back (docs/performance.md).
   */
  const claimable = `o.status = 'pending'
           AND o.next_attempt_at <= now()
           AND (o.claimed_by IS NULL OR o.claim_expires_at < now())
           AND coalesce((
                 SELECT e.status = 'published' FROM ${outbox} e
                  WHERE e.aggregate_type = o.aggregate_type
                    AND e.aggregate_id = o.aggregate_id
                    AND e.aggregate_version < o.aggregate_version
                  ORDER BY e.aggregate_version DESC
                  LIMIT 1), true)`;
  /**
   * The lowest pending position at or above the claim's floor, due or not, in the claim's snapshot:
   * where the next claim may start (claim-floor.ts). Computed once per statement (an InitPlan).
   */
  const lowestPending = (floor: string) =>
    `(SELECT min(p.position) FROM ${outbox} p WHERE p.status = 'pending' AND p.position >= ${floor}::bigint)::text AS lowest_pending`;
  return {
    /**
     * Claims up to $2 due rows for owner $1 with a lease of $3 ms, leaving out positions $4 (rows
     * skipped with backoff, set-aside.ts); with $5, only that position (claiming row by row after
     * the table refused one row of a batch); none below position $6 (claim-floor.ts, 0 for all). Only the earliest
     * unpublished event of each aggregate is eligible, so a retrying (or failed) event
     * holds back later versions of its own aggregate and nothing else.
     *
     * Its commit does not wait for the WAL flush (synchronous_commit off for this statement's
     * transaction only): that wait sat between every insert and its publish, and a claim is only
     * a lease. One lost to a server crash is a lease that ended early: the rows are claimed and
     * published again (a duplicate), and the mark of this claim finds no row it owns (fenced).
     * It is visible to other relays at once either way, and marks and reschedules still commit
     * durably, flushing the claim's WAL with theirs.
     */
    claim: `
      WITH candidates AS (
        SELECT o.position
          FROM ${outbox} o
         WHERE ${claimable}
           AND o.position <> ALL ($4::bigint[])
           AND ($5::bigint IS NULL OR o.position = $5)
           AND o.position >= $6::bigint
         ORDER BY o.position
         LIMIT $2
         FOR UPDATE SKIP LOCKED
      )
      -- An array of positions keeps the update on the primary key index; a join against the
      -- CTE lets the planner hash-join against a sequential scan of the whole outbox history.
      UPDATE ${outbox} o
         SET claimed_by = $1, claim_expires_at = now() + make_interval(secs => $3::double precision / 1000)
       WHERE o.position = ANY (ARRAY(SELECT position FROM candidates))
         AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
      RETURNING ${CLAIMED_COLUMNS}, ${lowestPending('$6')}`,

    /**
     * The exclusive relay's claim: the same rows the lease claim would take, minus the ones its
     * own batches still wait on ($2), from position $3 on (claim-floor.ts), read without writing anything. Only the holder of the
     * outbox's relay lock runs it, on the connection that holds the lock.
     */
    selectDue: `
      SELECT ${CLAIMED_COLUMNS}, ${lowestPending('$3')}
        FROM ${outbox} o
       WHERE ${claimable}
         AND o.position <> ALL ($2::bigint[])
         AND o.position >= $3::bigint
       ORDER BY o.position
       LIMIT $1`,

    /** The positions a claim of $1 rows would take, leaving out $2, from $3 on: to claim them one by one. */
    claimCandidates: `
      SELECT o.position FROM ${outbox} o
       WHERE ${claimable} AND o.position <> ALL ($2::bigint[]) AND o.position >= $3::bigint
       ORDER BY o.position LIMIT $1`,

    /**
     * A row the table refused to write ($1 position, $2 reason): failed, so it holds back only its own
     * aggregate. Not one under another relay's live lease ($3 this relay's owner, or null).
     */
    markRefused: `
      UPDATE ${outbox} o
         SET status = 'failed', last_error = $2, claimed_by = NULL, claim_expires_at = NULL
       WHERE o.position = $1 AND o.status = 'pending'
         AND (o.claimed_by IS NOT DISTINCT FROM $3::text OR o.claimed_by IS NULL OR o.claim_expires_at < now())
      RETURNING o.event_id`,

    /**
     * The outbox's relay lock, held for a session: while one connection holds it, its relay is
     * the only exclusive relay of this schema. The connection ending (a crash, a kill) frees it.
     */
    tryOwn: `SELECT pg_try_advisory_lock(${RELAY_LOCK}) AS owned`,
    disown: `SELECT pg_advisory_unlock(${RELAY_LOCK}) AS released`,
    /** A holder cut off from the server (a network partition) loses its lock after $1 ms, not TCP keepalive's hours. */
    idleLimit: `SELECT set_config('idle_session_timeout', $1, false)`,
    idleLimitReset: `RESET idle_session_timeout`,

    /**
     * `unblocks` says a later version of the same aggregate waits in the outbox: it became
     * claimable with this mark, so the relay claims again instead of sleeping.
     */
    markPublished: `
      UPDATE ${outbox} o
         SET status = 'published', published_at = now(), claimed_by = NULL, claim_expires_at = NULL, last_error = NULL
       WHERE o.position = ANY($2::bigint[]) AND o.claimed_by IS NOT DISTINCT FROM $1::text AND o.status = 'pending'
      RETURNING o.event_id,
                EXISTS (SELECT 1 FROM ${outbox} n
                         WHERE n.aggregate_type = o.aggregate_type AND n.aggregate_id = o.aggregate_id
                           AND n.aggregate_version > o.aggregate_version AND n.status <> 'published') AS unblocks`,

    /**
     * $2 positions, $3 errors, $4 delays in ms, $5 max attempts after which a row is failed, $6 give
     * up now, $7 charged to the event (an attempt) or else to the broker (a broker retry, never failing).
     */
    reschedule: `
      UPDATE ${outbox} o
         SET attempts = o.attempts + CASE WHEN f.charged THEN 1 ELSE 0 END,
             broker_retries = o.broker_retries + CASE WHEN f.charged THEN 0 ELSE 1 END,
             last_error = f.error,
             next_attempt_at = now() + make_interval(secs => f.delay_ms / 1000.0),
             status = CASE WHEN f.give_up OR (f.charged AND o.attempts + 1 >= $5) THEN 'failed' ELSE 'pending' END,
             claimed_by = NULL, claim_expires_at = NULL
        FROM unnest($2::bigint[], $3::text[], $4::double precision[], $6::boolean[], $7::boolean[])
             AS f(position, error, delay_ms, give_up, charged)
       WHERE o.position = f.position AND o.claimed_by IS NOT DISTINCT FROM $1::text AND o.status = 'pending'
      RETURNING o.event_id, o.status, o.attempts, o.broker_retries`,

    /**
     * Gives claims back untouched (attempts, backoff and last_error stay): for publishes that
     * waited on a blocked broker connection, which judged nothing about the events.
     */
    release: `
      UPDATE ${outbox} o
         SET claimed_by = NULL, claim_expires_at = NULL
       WHERE o.position = ANY($2::bigint[]) AND o.claimed_by IS NOT DISTINCT FROM $1::text AND o.status = 'pending'
      RETURNING o.event_id`,
  };
});

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

/** The outbox columns an envelope is made of, as node-postgres returns them. */
export type OutboxEnvelopeRow = Omit<ClaimedRow, 'position' | 'attempts' | 'broker_retries'>;

export interface ClaimedRow {
  position: string;
  event_id: string;
  aggregate_type: string;
  aggregate_id: string;
  aggregate_version: string;
  event_type: string;
  schema_version: number;
  kind: 'incremental' | 'snapshot';
  payload: unknown;
  occurred_at: Date;
  traceparent: string | null;
  tenant_id: string | null;
  /** Comma-separated sensitive payload paths (migration 16); null or absent: unknown. */
  sensitive_fields?: string | null;
  attempts: number;
  broker_retries: number;
  /** The claim's view of where the next claim may start (claim-floor.ts); the same on every row. */
  lowest_pending?: string | null;
}
