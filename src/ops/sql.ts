import { perSchema, type SchemaRef } from '../runtime/identifier.js';

/**
 * Source rows (of a validated, quoted table and columns) whose version is above the newest
 * outbox event of their aggregate: business changes committed without their event. $1
 * aggregate type, $2 only rows changed in the last $2 ms (when a change column is given), $3 limit.
 */
export function sourceAheadSql(
  schema: SchemaRef,
  source: { table: string; id: string; version: string; changedAt?: string },
): string {
  const recent = source.changedAt
    ? `WHERE ${source.changedAt} >= now() - make_interval(secs => $2::double precision / 1000)`
    : 'WHERE $2::double precision IS NOT NULL';
  return `
    SELECT s.id FROM (SELECT ${source.id}::text AS id, ${source.version}::bigint AS version FROM ${source.table} ${recent}) AS s
     WHERE s.version > coalesce((SELECT max(o.aggregate_version) FROM ${schema.quoted}.outbox o WHERE o.aggregate_type = $1 AND o.aggregate_id = s.id), 0)
     LIMIT $3`;
}

/** Read-mostly operational queries over converge's tables of one schema, built once per schema. */
export const opsSql = perSchema((schema: SchemaRef) => {
  return {
    outboxStatus: `
      SELECT status, count(*)::bigint AS n,
             EXTRACT(EPOCH FROM now() - min(occurred_at)) AS oldest_age_seconds
        FROM ${schema.quoted}.outbox GROUP BY status`,
    /**
     * Failed outbox rows per reason (last_error holds a code and a rule, never a value), the most
     * common first; the unpublished index keeps it off the published history.
     */
    failedReasons: `
      SELECT coalesce(last_error, '(no reason recorded)') AS reason, count(*)::bigint AS n
        FROM ${schema.quoted}.outbox WHERE status = 'failed'
       GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20`,
    openQuarantine: `SELECT reason, count(*)::bigint AS n FROM ${schema.quoted}.quarantine WHERE resolved_at IS NULL GROUP BY reason`,
    /**
     * Remote effect keys that need a look: failed ones, and pending ones last called more than $1 ms
     * ago (outcome unknown); with up to five effect names among them. Counts and names only.
     */
    effectsNeedingLook: `
      WITH needing AS (
        SELECT status, effect FROM ${schema.quoted}.effects
         WHERE status = 'failed'
            OR (status = 'pending' AND last_called_at < now() - make_interval(secs => $1::double precision / 1000))
      )
      SELECT count(*) FILTER (WHERE status = 'failed')::bigint AS failed,
             count(*) FILTER (WHERE status = 'pending')::bigint AS stale_pending,
             (SELECT coalesce(array_agg(effect ORDER BY effect), '{}')
                FROM (SELECT DISTINCT effect FROM needing ORDER BY effect LIMIT 5) AS names) AS sample_effects
        FROM needing`,
    /** Per consumer: parked events, aggregates waiting longer than $1 ms for a missing version, age of the oldest park. */
    reorderBuffer: `
      SELECT consumer, count(*)::bigint AS parked,
             count(DISTINCT (aggregate_type, aggregate_id)) FILTER (WHERE parked_at <= now() - make_interval(secs => $1::double precision / 1000))::bigint AS gaps,
             EXTRACT(EPOCH FROM now() - min(parked_at)) AS oldest_age_seconds
        FROM ${schema.quoted}.parked GROUP BY consumer`,
    /**
     * One bounded batch of published outbox rows older than $1 ms; $2 rows at most; rows another cleaner
     * holds are skipped. $3: the highest position the run deleted so far, so each batch starts its index
     * walk there instead of crossing every entry the earlier batches left for vacuum (quadratic: 5M rows
     * took 17 minutes without it). Answers how many went and the last position.
     */
    deletePublishedOutbox: `
      WITH gone AS (
        DELETE FROM ${schema.quoted}.outbox
         WHERE position IN (SELECT position FROM ${schema.quoted}.outbox
                             WHERE position > $3::bigint AND status = 'published'
                               AND published_at < now() - make_interval(secs => $1::double precision / 1000)
                             ORDER BY position LIMIT $2
                             FOR UPDATE SKIP LOCKED)
         RETURNING position)
      SELECT count(*)::int AS n, max(position)::text AS last FROM gone`,
    /**
     * One bounded batch of inbox rows received more than $1 ms ago; $2 rows at most. $3: the highest
     * row address the run deleted so far, so the scan (a TID range scan) skips the pages already emptied.
     * A scan that returns rows out of address order only makes a batch skip some: the next run takes them.
     */
    deleteOldInbox: `
      WITH gone AS (
        DELETE FROM ${schema.quoted}.inbox
         WHERE ctid IN (SELECT ctid FROM ${schema.quoted}.inbox
                         WHERE ctid > $3::tid
                           AND received_at < now() - make_interval(secs => $1::double precision / 1000)
                         LIMIT $2
                         FOR UPDATE SKIP LOCKED)
         RETURNING ctid)
      SELECT count(*)::int AS n, (SELECT ctid FROM gone ORDER BY ctid DESC LIMIT 1)::text AS last FROM gone`,
    /**
     * One compaction batch for consumer $1 and projection $2: up to $4 inbox rows received more
     * than $3 ms ago whose version the projection has already applied (so its version check
     * refuses them again), deleted and folded into one watermark per aggregate. Only inbox rows
     * are locked (SKIP LOCKED, so compactors share the work), never projection_state, which the
     * consumer's hot path moves. Watermarks are written in key order so two compactors touching
     * the same aggregates wait for each other instead of deadlocking, and never move down.
     */
    compactInbox: `
      WITH picked AS (
        SELECT i.event_id
          FROM ${schema.quoted}.inbox i
          JOIN ${schema.quoted}.projection_state s
            ON s.projection = $2 AND s.aggregate_type = i.aggregate_type AND s.aggregate_id = i.aggregate_id
         WHERE i.consumer = $1
           AND i.received_at < now() - make_interval(secs => $3::double precision / 1000)
           AND i.aggregate_version <= s.version
         LIMIT $4
         FOR UPDATE OF i SKIP LOCKED
      ), deleted AS (
        DELETE FROM ${schema.quoted}.inbox d USING picked p
         WHERE d.consumer = $1 AND d.event_id = p.event_id
        RETURNING d.aggregate_type, d.aggregate_id, d.aggregate_version
      ), marked AS (
        INSERT INTO ${schema.quoted}.inbox_watermark AS w (consumer, aggregate_type, aggregate_id, version)
        SELECT $1, aggregate_type, aggregate_id, max(aggregate_version)
          FROM deleted GROUP BY aggregate_type, aggregate_id
         ORDER BY aggregate_type, aggregate_id
        ON CONFLICT (consumer, aggregate_type, aggregate_id)
        DO UPDATE SET version = GREATEST(w.version, EXCLUDED.version), compacted_at = now()
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM deleted)::int AS compacted, (SELECT count(*) FROM marked)::int AS watermarks`,
    /** Outbox rows in status $1, oldest first, $2 at most: what a person needs to decide, without payloads. */
    listOutbox: `
      SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, status, attempts, broker_retries, last_error,
             occurred_at, EXTRACT(EPOCH FROM now() - occurred_at) AS age_seconds
        FROM ${schema.quoted}.outbox WHERE status = $1 ORDER BY position LIMIT $2`,
    /**
     * Quarantined messages, newest first, without bodies: $1 consumer, $2 reason, $3 event
     * type (from the stored body, when it parses), $4 minimum age in ms, $5 include resolved, $6 limit.
     */
    listQuarantine: `
      SELECT id, consumer, event_id, reason, detail, routing_key, quarantined_at, resolved_at, resolution, resolution_note,
             replay_outcome, replay_outcome_at, replay_quarantine_id,
             EXTRACT(EPOCH FROM now() - quarantined_at) AS age_seconds, length(body) AS body_bytes
        FROM ${schema.quoted}.quarantine
       WHERE ($1::text IS NULL OR consumer = $1)
         AND ($2::text IS NULL OR reason = $2)
         AND ($3::text IS NULL OR properties->>'type' = $3)
         AND quarantined_at <= now() - make_interval(secs => $4::double precision / 1000)
         AND ($5::boolean OR resolved_at IS NULL)
       ORDER BY id DESC LIMIT $6`,
    quarantined: `SELECT id, consumer, event_id, reason, detail, exchange, routing_key, properties, properties_exact, body, quarantined_at, resolved_at, resolution, resolution_note,
                         replay_outcome, replay_outcome_at, replay_quarantine_id
                    FROM ${schema.quoted}.quarantine WHERE id = $1`,
    /** Closes one open row ($4: a replay's token, else null); nothing if it was closed already (by another operator). */
    resolveQuarantine: `UPDATE ${schema.quoted}.quarantine SET resolved_at = now(), resolution = $2, resolution_note = $3, replay_token = $4
                         WHERE id = $1 AND resolved_at IS NULL RETURNING id`,
    /** The key converge signs its own headers with (migration 18): a replay signs its replay headers. */
    headerKey: `SELECT key FROM ${schema.quoted}.header_key`,
    consumerQueue: `SELECT queue FROM ${schema.quoted}.consumer_schemas
      WHERE consumer = $1 AND queue IS NOT NULL ORDER BY last_seen_at DESC LIMIT 1`,
    /**
     * One sample of the outbox for rates: pending (partial index), failed (the unpublished
     * index), the newest position (appends since the last sample) and the oldest pending age.
     */
    outboxSample: `
      SELECT (SELECT count(*) FROM ${schema.quoted}.outbox WHERE status = 'pending')::bigint AS pending,
             (SELECT count(*) FROM ${schema.quoted}.outbox WHERE status = 'failed')::bigint AS failed,
             (SELECT coalesce(max(position), 0) FROM ${schema.quoted}.outbox)::bigint AS max_position,
             EXTRACT(EPOCH FROM now() - (SELECT min(occurred_at) FROM ${schema.quoted}.outbox WHERE status = 'pending')) AS oldest_age_seconds,
             clock_timestamp() AS sampled_at`,
    /** Inbox rows per consumer ($2) recorded since $1 (the BRIN index on received_at keeps this off a full scan). */
    inboxSince: `
      SELECT consumer, count(*)::bigint AS n FROM ${schema.quoted}.inbox
       WHERE received_at >= $1 AND consumer = ANY($2::text[]) GROUP BY consumer`,
    /** projection_state rows of the projections $1 changed in the last $2 ms. */
    projectionUpdates: `
      SELECT projection, count(*)::bigint AS n FROM ${schema.quoted}.projection_state
       WHERE projection = ANY($1::text[]) AND updated_at >= now() - make_interval(secs => $2::double precision / 1000)
       GROUP BY projection`,
    /** Lag from occurredAt to the inbox row, per consumer, over the last $1 ms. */
    lag: `
      SELECT consumer,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
             percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99,
             max(lag) AS max, count(*)::bigint AS events
        FROM (SELECT consumer, greatest(0, EXTRACT(EPOCH FROM received_at - occurred_at)) AS lag
                FROM ${schema.quoted}.inbox
               WHERE received_at >= now() - make_interval(secs => $1::double precision / 1000) AND occurred_at IS NOT NULL) AS recent
       GROUP BY consumer ORDER BY consumer`,
    /** Puts failed events back in line; `$1` limits it to one event id when given. */
    retryFailed: `
      UPDATE ${schema.quoted}.outbox
         SET status = 'pending', attempts = 0, broker_retries = 0, next_attempt_at = now(), claimed_by = NULL, claim_expires_at = NULL
       WHERE status = 'failed' AND ($1::text IS NULL OR event_id = $1)
      RETURNING event_id`,
    /** The failed rows retryFailed would take ($1: one eventId or all), for the row-by-row fallback. */
    failedRows: `
      SELECT position::text AS position, event_id FROM ${schema.quoted}.outbox
       WHERE status = 'failed' AND ($1::text IS NULL OR event_id = $1) ORDER BY position`,
    /** retryFailed for the one row at position $1; nothing if it is no longer failed (retried by someone else). */
    retryFailedRow: `
      UPDATE ${schema.quoted}.outbox
         SET status = 'pending', attempts = 0, broker_retries = 0, next_attempt_at = now(), claimed_by = NULL, claim_expires_at = NULL
       WHERE position = $1 AND status = 'failed'
      RETURNING event_id`,
    /** Why the failed row at position $1 could not be retried ($2: a code and a constraint, never a value). */
    markRetryRefused: `UPDATE ${schema.quoted}.outbox SET last_error = $2 WHERE position = $1 AND status = 'failed'`,
  };
});

/** The schema registry (migration 15) and what `converge compat` reads, of one schema. */
export const compatSql = perSchema((schema: SchemaRef) => {
  const s = schema.quoted;
  return {
    /**
     * Every instance row: running when not stopped and refreshed within $2 ms, live when refreshed
     * within $1 ms (both by the database's clock, which the heartbeats write with). Newest first.
     */
    registry: `
      SELECT consumer, instance, queue, accepts, started_at, last_seen_at, stopped_at,
             (stopped_at IS NULL AND last_seen_at >= now() - make_interval(secs => $2::double precision / 1000)) AS running,
             last_seen_at >= now() - make_interval(secs => $1::double precision / 1000) AS live
        FROM ${s}.consumer_schemas
       ORDER BY consumer, last_seen_at DESC, instance`,
    /**
     * Events consumer $4 waits for whose version the ranges ($1 types, $2 mins, $3 maxs) leave out,
     * per place, type and version, with $5 ids each: unpublished outbox rows; published ones that
     * reached neither its inbox, its compaction watermark nor its quarantine (so still queued or
     * parked); its open quarantine rows. Types not in $1 are read whatever their version.
     */
    unreadable: `
      WITH waiting AS (
        SELECT 'outbox' AS place, o.event_type, o.schema_version, o.event_id AS id, o.occurred_at AS at
          FROM ${s}.outbox o
         WHERE o.status <> 'published' AND o.event_type = ANY($1::text[])
        UNION ALL
        SELECT 'in-flight', o.event_type, o.schema_version, o.event_id, o.occurred_at
          FROM ${s}.outbox o
         WHERE o.status = 'published' AND o.event_type = ANY($1::text[])
           AND NOT EXISTS (SELECT 1 FROM ${s}.inbox i WHERE i.consumer = $4 AND i.event_id = o.event_id)
           AND NOT EXISTS (SELECT 1 FROM ${s}.inbox_watermark w
                            WHERE w.consumer = $4 AND w.aggregate_type = o.aggregate_type
                              AND w.aggregate_id = o.aggregate_id AND w.version >= o.aggregate_version)
           AND NOT EXISTS (SELECT 1 FROM ${s}.quarantine q
                            WHERE q.consumer = $4 AND q.event_id = o.event_id
                              AND (q.resolved_at IS NULL OR q.resolution = 'discarded'))
        UNION ALL
        SELECT 'quarantine', q.event_type, q.schema_version, q.id::text, q.quarantined_at
          FROM ${s}.quarantine q
         WHERE q.consumer = $4 AND q.resolved_at IS NULL
           AND q.event_type = ANY($1::text[]) AND q.schema_version IS NOT NULL
      )
      SELECT place, event_type, schema_version, count(*)::bigint AS n,
             (array_agg(id ORDER BY at, id))[1:$5] AS sample
        FROM waiting w
       WHERE NOT EXISTS (SELECT 1 FROM unnest($1::text[], $2::int[], $3::int[]) AS a(event_type, lo, hi)
                          WHERE a.event_type = w.event_type AND w.schema_version BETWEEN a.lo AND a.hi)
       GROUP BY place, event_type, schema_version
       ORDER BY place, event_type, schema_version`,
  };
});

/**
 * What holds back the xmin horizon vacuum works to: this database's backends with a snapshot
 * (walsenders too: a standby's hot_standby_feedback without a slot shows there), prepared
 * transactions and replication slots with an xmin; the five furthest behind. `slotInactiveSince`:
 * the server has pg_replication_slots.inactive_since (PostgreSQL 17 and later); a column that does
 * not exist cannot be named even in a branch never taken, hence two texts.
 */
export function horizonHoldersSql(slotInactiveSince: boolean): string {
  const slotAge = slotInactiveSince ? 'EXTRACT(EPOCH FROM now() - inactive_since)' : 'NULL::numeric';
  return `
    SELECT 'transaction' AS kind, pid::text || coalesce(' ' || nullif(application_name, ''), '') AS holder,
           EXTRACT(EPOCH FROM now() - coalesce(xact_start, backend_start)) AS age_seconds,
           age(backend_xmin) AS behind, state
      FROM pg_stat_activity
     WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
       AND (datname = current_database() OR backend_type = 'walsender')
    UNION ALL
    SELECT 'prepared-transaction', gid, EXTRACT(EPOCH FROM now() - prepared), age(transaction), NULL
      FROM pg_prepared_xacts
    UNION ALL
    SELECT 'replication-slot', slot_name, ${slotAge}, age(xmin), CASE WHEN active THEN 'active' ELSE 'inactive' END
      FROM pg_replication_slots WHERE xmin IS NOT NULL
     ORDER BY behind DESC LIMIT 5`;
}
