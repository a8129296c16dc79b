import { z } from 'zod';
import { quoteIdentifier, schemaRef } from '../runtime/identifier.js';
import { defineOptions, identifierOption, type OptionsInput, schemaOption } from '../runtime/options.js';

const qualifiedTable = z.string().refine((name) => {
  const parts = name.split('.');
  return parts.length === 2 && parts.every((part) => identifierOption.safeParse(part).success);
}, 'must be schema.table, each part matching /^[a-z_][a-z0-9_]{0,62}$/');

export const grantsOptions = defineOptions(
  'grantsSql',
  z.strictObject({
    schema: schemaOption,
    relayRole: identifierOption
      .optional()
      .describe('Role the relay connects as: claims and marks outbox rows, nothing else.'),
    consumerRole: identifierOption
      .optional()
      .describe(
        'Role a consumer connects as: inbox, reorder buffer, watermarks, quarantine, projection state and projectionTables.',
      ),
    consumerRoles: z
      .array(identifierOption)
      .default([])
      .describe('More consumer roles, granted the same as consumerRole.'),
    producerRole: identifierOption
      .optional()
      .describe("Role the application's business transactions run as, appending to the outbox."),
    projectionTables: z
      .array(qualifiedTable)
      .default([])
      .describe('`schema.table` read models the consumer roles write (SELECT, INSERT, UPDATE, DELETE).'),
  }),
);

export type GrantsOptions = OptionsInput<typeof grantsOptions>;

/**
 * The least privileges each runtime role needs, as GRANT statements to run as the role that
 * owns the schema (the migration role) after `converge migrate`. Derived from the statements
 * each component runs:
 *
 * - relay: claims with `SELECT … FOR UPDATE SKIP LOCKED` and marks with `UPDATE … RETURNING`,
 *   which need SELECT and UPDATE on the outbox; LISTEN needs no grant.
 * - producer: `INSERT … RETURNING position, event_id` needs INSERT, SELECT on just those two
 *   columns, and USAGE on the bigserial's sequence; the NOTIFY trigger needs nothing more.
 * - consumer: inbox INSERT … ON CONFLICT DO NOTHING RETURNING and fingerprint reads; watermark
 *   reads; parked read, insert, delete; quarantine upserts (ON CONFLICT DO UPDATE) and replay
 *   outcomes, with the bigserial's sequence; projection_state reads, row locks, inserts, updates;
 *   the effects a handler performs with performEffect (a row per key, inserted then updated);
 *   its schema registry rows (upsert, and delete of its own superseded ones); the header key
 *   (migration 18), read to sign the retry copies it sends and to check the headers it receives.
 * - producer, besides: reads the schema registry, for the opt-in compat guard.
 *
 * Nobody gets DELETE on the outbox or inbox, TRUNCATE, or anything on `migrations`: retention,
 * compaction, DLQ and reconciliation tools run as the owning (migration) role.
 * Tables added by later migrations need the statements run again after upgrading.
 */
export function grantsSql(input: GrantsOptions = {}): string {
  const options = grantsOptions.parse(input);
  const schema = schemaRef(options.schema);
  // Roles and the read-model tables are not converge's schema: quoteIdentifier, per call, since
  // the text depends on them (a one-off script, not a hot path).
  const consumers = [...(options.consumerRole ? [options.consumerRole] : []), ...options.consumerRoles];
  const lines: string[] = [
    `-- converge grants for schema ${schema.quoted}; run as the role that owns it (the migration role).`,
  ];

  if (options.relayRole) {
    const r = quoteIdentifier(options.relayRole);
    lines.push(
      `-- relay ${r}: claim and mark outbox rows`,
      `GRANT USAGE ON SCHEMA ${schema.quoted} TO ${r};`,
      `GRANT SELECT, UPDATE ON ${schema.quoted}.outbox TO ${r};`,
    );
  }

  if (options.producerRole) {
    const p = quoteIdentifier(options.producerRole);
    lines.push(
      `-- producer ${p}: append events in business transactions`,
      `GRANT USAGE ON SCHEMA ${schema.quoted} TO ${p};`,
      `GRANT INSERT ON ${schema.quoted}.outbox TO ${p};`,
      `GRANT SELECT (position, event_id) ON ${schema.quoted}.outbox TO ${p};`,
      `GRANT USAGE ON SEQUENCE ${schema.quoted}.outbox_position_seq TO ${p};`,
      `GRANT SELECT ON ${schema.quoted}.consumer_schemas TO ${p};`,
    );
  }

  for (const consumer of consumers) {
    const c = quoteIdentifier(consumer);
    lines.push(
      `-- consumer ${c}: inbox, reorder buffer, watermarks, quarantine, projection versions, remote effects`,
      `GRANT USAGE ON SCHEMA ${schema.quoted} TO ${c};`,
      `GRANT SELECT, INSERT ON ${schema.quoted}.inbox TO ${c};`,
      `GRANT SELECT ON ${schema.quoted}.inbox_watermark TO ${c};`,
      `GRANT SELECT, INSERT, DELETE ON ${schema.quoted}.parked TO ${c};`,
      `GRANT SELECT, INSERT, UPDATE ON ${schema.quoted}.quarantine TO ${c};`,
      `GRANT USAGE ON SEQUENCE ${schema.quoted}.quarantine_id_seq TO ${c};`,
      `GRANT SELECT ON ${schema.quoted}.header_key TO ${c};`,
      `GRANT SELECT, INSERT, UPDATE ON ${schema.quoted}.projection_state TO ${c};`,
      `GRANT SELECT, INSERT, UPDATE ON ${schema.quoted}.effects TO ${c};`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ${schema.quoted}.consumer_schemas TO ${c};`,
    );
    for (const table of options.projectionTables) {
      const [tableSchema, tableName] = table.split('.') as [string, string];
      const t = `${quoteIdentifier(tableSchema)}.${quoteIdentifier(tableName)}`;
      lines.push(
        `GRANT USAGE ON SCHEMA ${quoteIdentifier(tableSchema)} TO ${c};`,
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ${t} TO ${c};`,
      );
    }
  }
  return lines.join('\n');
}
