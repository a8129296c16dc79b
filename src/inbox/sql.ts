/** Statements of the inbox and quarantine tables, for one quoted schema. */
export function inboxSql(schema: string) {
  return {
    /**
     * One statement for a whole batch; the unique key arbitrates concurrent deliveries of one
     * event, and RETURNING names the events that are new to this consumer.
     */
    insert: `
      INSERT INTO ${schema}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type)
      SELECT $1, e.* FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[])
                          AS e(event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type)
      ON CONFLICT (consumer, event_id) DO NOTHING
      RETURNING event_id`,
    storedFingerprints: `SELECT event_id, fingerprint FROM ${schema}.inbox WHERE consumer = $1 AND event_id = ANY($2::text[])`,
    quarantine: `
      INSERT INTO ${schema}.quarantine (consumer, event_id, reason, detail, fingerprint, exchange, routing_key, properties, body)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
      RETURNING id`,
  };
}
