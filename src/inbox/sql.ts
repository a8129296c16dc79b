import { perSchema, type SchemaRef } from '../runtime/identifier.js';

/** An open row's message quarantined again: first seen stays, last seen and how often move on. */
const quarantineSeenAgain = `
      DO UPDATE SET last_seen_at = now(), times_seen = quarantine.times_seen + 1,
                    attempts = GREATEST(quarantine.attempts, EXCLUDED.attempts),
                    reason = EXCLUDED.reason, detail = EXCLUDED.detail, failure_class = EXCLUDED.failure_class
      RETURNING id`;

/** Statements of the inbox, parked and quarantine tables of one schema, built once per schema. */
export const inboxSql = perSchema((ref: SchemaRef) => {
  const schema = ref.quoted;
  return {
    /**
     * One statement for a whole batch; the unique key arbitrates concurrent deliveries of one
     * event, and RETURNING names the events that are new to this consumer. No conflict target: a
     * partitioned inbox has its (consumer, event_id) key in each partition, not on the parent.
     */
    insert: `
      INSERT INTO ${schema}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, occurred_at)
      SELECT $1, e.* FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::timestamptz[])
                          AS e(event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, occurred_at)
      ON CONFLICT DO NOTHING
      RETURNING event_id`,
    storedFingerprints: `SELECT event_id, fingerprint FROM ${schema}.inbox WHERE consumer = $1 AND event_id = ANY($2::text[])`,
    /** $1 consumer, $2 type, $3 id, $4 total cap: parked rows of this aggregate, and of the consumer up to the cap. */
    parkedCounts: `
      SELECT (SELECT count(*) FROM ${schema}.parked WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3) AS aggregate,
             (SELECT count(*) FROM (SELECT 1 FROM ${schema}.parked WHERE consumer = $1 LIMIT $4) AS capped) AS total`,
    park: `
      INSERT INTO ${schema}.parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body, properties_exact)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11)
      ON CONFLICT (consumer, event_id) DO NOTHING
      RETURNING event_id`,
    parkedFingerprint: `SELECT fingerprint FROM ${schema}.parked WHERE consumer = $1 AND event_id = $2`,
    /**
     * Aggregates of a just-committed batch ($2 types, $3 ids, $4 versions) that have parked
     * events at or below the next version: the next one can apply now, and older ones are
     * copies of events that arrived again after being parked (they drain as duplicates).
     */
    parkedSuccessors: `
      SELECT DISTINCT p.aggregate_type, p.aggregate_id
        FROM unnest($2::text[], $3::text[], $4::bigint[]) AS k(aggregate_type, aggregate_id, version)
        JOIN ${schema}.parked p
          ON p.consumer = $1 AND p.aggregate_type = k.aggregate_type AND p.aggregate_id = k.aggregate_id
         AND p.aggregate_version <= k.version + 1`,
    /** Aggregates whose parked events can apply now ($2 at most): a sweep after a restart, a repair or a rebuild. */
    parkedReady: `
      SELECT DISTINCT p.aggregate_type, p.aggregate_id
        FROM ${schema}.parked p
        LEFT JOIN ${schema}.projection_state s
          ON s.projection = p.projection AND s.aggregate_type = p.aggregate_type AND s.aggregate_id = p.aggregate_id
       WHERE p.consumer = $1 AND p.aggregate_version <= coalesce(s.version, 0) + 1
       LIMIT $2`,
    /** The parked events of one aggregate in version order, $4 at most. */
    parkedOfAggregate: `
      SELECT event_id, aggregate_version, properties, properties_exact, body FROM ${schema}.parked
       WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3
       ORDER BY aggregate_version, parked_at
       LIMIT $4`,
    /**
     * Aggregates with parked events, per consumer and projection, whose oldest parked event
     * waited at least $2 ms; $1 consumer or null for all, $3 row limit. Oldest first.
     */
    gaps: `
      SELECT p.consumer, p.projection, p.aggregate_type, p.aggregate_id,
             coalesce(s.version, 0) AS current_version,
             array_agg(p.aggregate_version ORDER BY p.aggregate_version) AS parked_versions,
             min(p.parked_at) AS oldest_parked_at,
             floor(extract(epoch FROM now() - min(p.parked_at)) * 1000) AS age_ms
        FROM ${schema}.parked p
        LEFT JOIN ${schema}.projection_state s
          ON s.projection = p.projection AND s.aggregate_type = p.aggregate_type AND s.aggregate_id = p.aggregate_id
       WHERE $1::text IS NULL OR p.consumer = $1
       GROUP BY p.consumer, p.projection, p.aggregate_type, p.aggregate_id, s.version
      HAVING min(p.parked_at) <= now() - make_interval(secs => $2::double precision / 1000)
       ORDER BY min(p.parked_at)
       LIMIT $3`,
    /** The compaction watermark of one aggregate for consumer $1: every version at or below it was applied and compacted. */
    watermark: `SELECT version FROM ${schema}.inbox_watermark WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
    unpark: `DELETE FROM ${schema}.parked WHERE consumer = $1 AND event_id = ANY($2::text[])`,
    quarantine: `
      INSERT INTO ${schema}.quarantine (consumer, event_id, reason, detail, fingerprint, exchange, routing_key, properties, body,
                                        event_type, schema_version, failure_class, attempts, properties_exact, message_hash)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $14, $15)
      ON CONFLICT (consumer, event_id, fingerprint) WHERE resolved_at IS NULL AND event_id IS NOT NULL AND fingerprint IS NOT NULL
      ${quarantineSeenAgain}`,
    /** The same for a message without eventId or fingerprint (it failed before them): known by the hash of its bytes. */
    quarantineByHash: `
      INSERT INTO ${schema}.quarantine (consumer, event_id, reason, detail, fingerprint, exchange, routing_key, properties, body,
                                        event_type, schema_version, failure_class, attempts, properties_exact, message_hash)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $14, $15)
      ON CONFLICT (consumer, message_hash) WHERE resolved_at IS NULL AND (event_id IS NULL OR fingerprint IS NULL)
      ${quarantineSeenAgain}`,
    /**
     * What became of replayed messages ($1 quarantine ids, $2 outcomes, $3 new quarantine ids),
     * on the transaction that settled them, $4 the replay tokens: only the replay that stored its
     * token on the row records there. The first final outcome stays: a redelivery of an
     * applied replay must not turn it into a duplicate; only `parked` may still change.
     */
    /**
     * Waits for the replays of quarantine rows $1 still in flight: a replay stores its token and
     * commits only after the broker confirmed the copy, which may reach this consumer first. The
     * outcome UPDATE below matches on the token, and an UPDATE waits only for rows that match in
     * its snapshot, so without this wait it would skip the row whose token is not committed yet.
     */
    awaitReplays: `SELECT id FROM ${schema}.quarantine WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`,
    replayOutcome: `
      UPDATE ${schema}.quarantine q
         SET replay_outcome = r.outcome, replay_outcome_at = now(), replay_quarantine_id = r.quarantine_id
        FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[]) AS r(id, outcome, quarantine_id, token)
       WHERE q.id = r.id AND q.replay_token = r.token AND (q.replay_outcome IS NULL OR q.replay_outcome = 'parked')`,
    /** The schema's key for converge's own headers (migration 18). */
    headerKey: `SELECT key FROM ${schema}.header_key`,
    /**
     * The schema registry (migration 15): instance $2 of consumer $1 on queue $3 reads versions $4
     * (formatAccepts text). Written on subscribe and as the heartbeat; a stopped row is running again.
     */
    registerInstance: `
      INSERT INTO ${schema}.consumer_schemas (consumer, instance, queue, accepts) VALUES ($1, $2, $3, $4)
      ON CONFLICT (consumer, instance) DO UPDATE SET last_seen_at = now(), stopped_at = NULL`,
    /**
     * Rows of consumer $1 other than instance $2 that no longer run (stopped, or silent for $3 ms)
     * and have a newer row with the same accepted versions: one row per accepted set stays as history.
     */
    pruneInstances: `
      DELETE FROM ${schema}.consumer_schemas r
       WHERE r.consumer = $1 AND r.instance <> $2
         AND (r.stopped_at IS NOT NULL OR r.last_seen_at < now() - make_interval(secs => $3::double precision / 1000))
         AND EXISTS (SELECT 1 FROM ${schema}.consumer_schemas n
                      WHERE n.consumer = r.consumer AND n.accepts = r.accepts AND n.instance <> r.instance
                        AND n.last_seen_at > r.last_seen_at)`,
    stopInstance: `UPDATE ${schema}.consumer_schemas SET stopped_at = now(), last_seen_at = now() WHERE consumer = $1 AND instance = $2`,
  };
});
