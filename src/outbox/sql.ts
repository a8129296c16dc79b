import { perSchema, type SchemaRef } from '../runtime/identifier.js';

/**
 * One set-based insert serves single events and batches: twelve parallel arrays, one row per
 * index. A NULL occurred_at takes the transaction's now(), like the column default. Built once per schema.
 */
export const outboxSql = perSchema((schema: SchemaRef) => {
  return {
    insert: `
      INSERT INTO ${schema.quoted}.outbox
        (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, schema_version, kind, payload, occurred_at, traceparent, tenant_id, sensitive_fields)
      SELECT e.event_id, e.aggregate_type, e.aggregate_id, e.aggregate_version, e.event_type, e.schema_version, e.kind,
             e.payload, COALESCE(e.occurred_at, now()), e.traceparent, e.tenant_id, e.sensitive_fields
        FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::int[], $7::text[],
                    $8::jsonb[], $9::timestamptz[], $10::text[], $11::text[], $12::text[])
             WITH ORDINALITY AS e(event_id, aggregate_type, aggregate_id, aggregate_version, event_type, schema_version, kind,
                                  payload, occurred_at, traceparent, tenant_id, sensitive_fields, ord)
       ORDER BY e.ord
      RETURNING position, event_id`,
  };
});
