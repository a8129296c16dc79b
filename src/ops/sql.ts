/** Read-mostly operational queries over converge's tables, for one quoted schema. */
export function opsSql(schema: string) {
  return {
    outboxStatus: `
      SELECT status, count(*)::bigint AS n,
             EXTRACT(EPOCH FROM now() - min(occurred_at)) AS oldest_age_seconds
        FROM ${schema}.outbox GROUP BY status`,
    openQuarantine: `SELECT reason, count(*)::bigint AS n FROM ${schema}.quarantine WHERE resolved_at IS NULL GROUP BY reason`,
    /** Per consumer: parked events, aggregates waiting longer than $1 ms for a missing version, age of the oldest park. */
    reorderBuffer: `
      SELECT consumer, count(*)::bigint AS parked,
             count(DISTINCT (aggregate_type, aggregate_id)) FILTER (WHERE parked_at <= now() - make_interval(secs => $1::double precision / 1000))::bigint AS gaps,
             EXTRACT(EPOCH FROM now() - min(parked_at)) AS oldest_age_seconds
        FROM ${schema}.parked GROUP BY consumer`,
    /** One bounded batch of published outbox rows older than $1 ms; $2 rows at most; rows another cleaner holds are skipped. */
    deletePublishedOutbox: `
      DELETE FROM ${schema}.outbox
       WHERE position IN (SELECT position FROM ${schema}.outbox
                           WHERE status = 'published' AND published_at < now() - make_interval(secs => $1::double precision / 1000)
                           ORDER BY position LIMIT $2
                           FOR UPDATE SKIP LOCKED)`,
    /** One bounded batch of inbox rows received more than $1 ms ago; $2 rows at most. */
    deleteOldInbox: `
      DELETE FROM ${schema}.inbox
       WHERE ctid IN (SELECT ctid FROM ${schema}.inbox
                       WHERE received_at < now() - make_interval(secs => $1::double precision / 1000)
                       LIMIT $2
                       FOR UPDATE SKIP LOCKED)`,
    /** Outbox rows in status $1, oldest first, $2 at most: what a person needs to decide, without payloads. */
    listOutbox: `
      SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, status, attempts, last_error,
             occurred_at, EXTRACT(EPOCH FROM now() - occurred_at) AS age_seconds
        FROM ${schema}.outbox WHERE status = $1 ORDER BY position LIMIT $2`,
    /**
     * Quarantined messages, newest first, without bodies: $1 consumer, $2 reason, $3 event
     * type (from the stored body, when it parses), $4 minimum age in ms, $5 include resolved, $6 limit.
     */
    listQuarantine: `
      SELECT id, consumer, event_id, reason, detail, routing_key, quarantined_at, resolved_at, resolution, resolution_note,
             replay_outcome, replay_outcome_at, replay_quarantine_id,
             EXTRACT(EPOCH FROM now() - quarantined_at) AS age_seconds, length(body) AS body_bytes
        FROM ${schema}.quarantine
       WHERE ($1::text IS NULL OR consumer = $1)
         AND ($2::text IS NULL OR reason = $2)
         AND ($3::text IS NULL OR properties->>'type' = $3)
         AND quarantined_at <= now() - make_interval(secs => $4::double precision / 1000)
         AND ($5::boolean OR resolved_at IS NULL)
       ORDER BY id DESC LIMIT $6`,
    quarantined: `SELECT id, consumer, event_id, reason, detail, exchange, routing_key, properties, body, quarantined_at, resolved_at, resolution, resolution_note,
                         replay_outcome, replay_outcome_at, replay_quarantine_id
                    FROM ${schema}.quarantine WHERE id = $1`,
    /** Closes one open row; nothing if it was closed already (by another operator). */
    resolveQuarantine: `UPDATE ${schema}.quarantine SET resolved_at = now(), resolution = $2, resolution_note = $3
                         WHERE id = $1 AND resolved_at IS NULL RETURNING id`,
    /** Puts failed events back in line; `$1` limits it to one event id when given. */
    retryFailed: `
      UPDATE ${schema}.outbox
         SET status = 'pending', attempts = 0, next_attempt_at = now(), claimed_by = NULL, claim_expires_at = NULL
       WHERE status = 'failed' AND ($1::text IS NULL OR event_id = $1)
      RETURNING event_id`,
  };
}
