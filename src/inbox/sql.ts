/** Statements of the inbox and quarantine tables, for one quoted schema. */
export function inboxSql(schema: string) {
  return {
    /** The unique key arbitrates concurrent deliveries of one event; rowCount 0 means "seen before". */
    insert: `
      INSERT INTO ${schema}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type)
      VALUES ($1, $2, $3, $4, $5, $6, $7)
      ON CONFLICT (consumer, event_id) DO NOTHING`,
    storedFingerprint: `SELECT fingerprint FROM ${schema}.inbox WHERE consumer = $1 AND event_id = $2`,
    quarantine: `
      INSERT INTO ${schema}.quarantine (consumer, event_id, reason, detail, fingerprint, exchange, routing_key, properties, body)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
      RETURNING id`,
  };
}
