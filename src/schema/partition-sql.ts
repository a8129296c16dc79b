import { perSchema, quoteIdentifier, type SchemaRef } from '../runtime/identifier.js';
import { PARTITIONED_TABLES, type PartitionedTable } from './partition-plan.js';

/**
 * Keys each partition enforces on its own rows. PostgreSQL cannot hold a unique index across
 * partitions unless it includes the partition key, so every partition gets these locally and the
 * parent's trigger (below) looks into the other partitions.
 */
export const LOCAL_KEYS: Record<PartitionedTable, { primary: string[]; unique: string[][] }> = {
  outbox: { primary: ['position'], unique: [['event_id'], ['aggregate_type', 'aggregate_id', 'aggregate_version']] },
  inbox: { primary: ['consumer', 'event_id'], unique: [] },
};

const triggerSettings = 'LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp';

/**
 * Raised as the unpartitioned table's constraint would be, so callers that branch on 23505 and its
 * constraint name see no difference. SECURITY DEFINER: a producer role may insert without reading.
 * No advisory lock: one per row held to commit ran the lock table out on a transaction of 10,000
 * appends. The look sees every committed row and the transaction's own; two appends of one key still
 * in flight together meet in the target partition's own unique index, unless their transactions began
 * on either side of an interval's end (docs/operations.md says what guards that case).
 */
function outboxGuard(s: SchemaRef): string {
  const raise = (constraint: string, what: string) =>
    `RAISE EXCEPTION USING ERRCODE = 'unique_violation', CONSTRAINT = '${constraint}',
       MESSAGE = 'duplicate key value violates unique constraint "${constraint}"',
       DETAIL = 'an outbox row in another partition has the same ${what}'`;
  return `CREATE OR REPLACE FUNCTION ${s.quoted}.outbox_unique_across_partitions() RETURNS trigger ${triggerSettings} AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM ${s.quoted}.outbox WHERE event_id = NEW.event_id) THEN
        ${raise('outbox_event_id_key', 'event_id')};
      END IF;
      IF EXISTS (SELECT 1 FROM ${s.quoted}.outbox WHERE aggregate_type = NEW.aggregate_type
                    AND aggregate_id = NEW.aggregate_id AND aggregate_version = NEW.aggregate_version) THEN
        ${raise('outbox_aggregate_type_aggregate_id_aggregate_version_key', 'aggregate and version')};
      END IF;
      RETURN NEW;
    END $$`;
}

/** A repeat of an event the consumer recorded in another partition is skipped, as ON CONFLICT DO NOTHING skips it in one. */
function inboxGuard(s: SchemaRef): string {
  return `CREATE OR REPLACE FUNCTION ${s.quoted}.inbox_unique_across_partitions() RETURNS trigger ${triggerSettings} AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM ${s.quoted}.inbox WHERE consumer = NEW.consumer AND event_id = NEW.event_id) THEN
        RETURN NULL;
      END IF;
      RETURN NEW;
    END $$`;
}

/** Statements of the partitioned layout of one schema, built once per schema. */
export const partitionSql = perSchema((s: SchemaRef) => {
  const table = (name: string) => `${s.quoted}.${quoteIdentifier(name)}`;
  return {
    /** The interval and lead of each partitioned table; its presence is what makes a schema partitioned. */
    createLayout: `CREATE TABLE IF NOT EXISTS ${s.quoted}.partition_layout (
        table_name  text PRIMARY KEY CHECK (table_name IN ('outbox', 'inbox')),
        interval_ms bigint NOT NULL CHECK (interval_ms >= 1000),
        ahead       integer NOT NULL CHECK (ahead >= 1),
        storage     text[],
        created_at  timestamptz NOT NULL DEFAULT now()
      )`,
    /** $1 the quoted `schema.partition_layout`. */
    layoutExists: `SELECT to_regclass($1) IS NOT NULL AS present`,
    readLayout: `SELECT table_name, interval_ms::float8 AS interval_ms, ahead, storage FROM ${s.quoted}.partition_layout`,
    /** $1 table, $2 interval, $3 ahead, $4 storage parameters. */
    recordLayout: `INSERT INTO ${s.quoted}.partition_layout (table_name, interval_ms, ahead, storage) VALUES ($1, $2, $3, $4)
      ON CONFLICT (table_name) DO UPDATE SET ahead = EXCLUDED.ahead`,
    /** $1 the quoted table name: is it partitioned already. */
    isPartitioned: `SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass($1)) AS partitioned`,
    /** $1 the quoted parent: each partition with its range in ms (null from: MINVALUE). */
    listPartitions: `
      SELECT c.relname AS name,
             extract(epoch FROM (regexp_match(b.expr, 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz)::float8 * 1000 AS from_ms,
             extract(epoch FROM (regexp_match(b.expr, 'TO \\(''([^'']+)''\\)'))[1]::timestamptz)::float8 * 1000 AS to_ms
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) AS b
       WHERE i.inhparent = to_regclass($1)`,
    /** $1 the quoted table: its storage parameters, indexes that are not unique, and grants. */
    tableFacts: `
      SELECT c.reloptions AS storage,
             ARRAY(SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x WHERE x.indrelid = c.oid AND NOT x.indisunique) AS indexes,
             ARRAY(SELECT ir.relname::text FROM pg_index x JOIN pg_class ir ON ir.oid = x.indexrelid WHERE x.indrelid = c.oid) AS index_names,
             ARRAY(SELECT format('GRANT %s ON %s TO %s', a.privilege_type, $1::text,
                                 CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END)
                     FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner) AS grants,
             (SELECT pg_get_serial_sequence($1::text, a.attname) FROM pg_attribute a
                WHERE a.attrelid = c.oid AND a.attname = 'position' AND NOT a.attisdropped) AS sequence
        FROM pg_class c WHERE c.oid = to_regclass($1::text)`,
    /** $1 the table's oid as text: publications that list the table by name. */
    publicationsOf: `SELECT p.pubname FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid WHERE r.prrelid = to_regclass($1)`,
    addCreatedAt: `ALTER TABLE ${s.quoted}.outbox ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now()`,
    renameTable: (from: PartitionedTable, to: string) => `ALTER TABLE ${table(from)} RENAME TO ${quoteIdentifier(to)}`,
    renameIndex: (from: string, to: string) => `ALTER INDEX ${table(from)} RENAME TO ${quoteIdentifier(to)}`,
    dropNotifyTrigger: (on: string) => `DROP TRIGGER IF EXISTS outbox_notify_insert ON ${table(on)}`,
    createParent: (name: PartitionedTable, from: string) =>
      `CREATE TABLE ${table(name)} (LIKE ${table(from)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS)
         PARTITION BY RANGE (${PARTITIONED_TABLES[name]})`,
    /** The sequence moves to the parent, so dropping the converted table does not take it along. */
    ownSequence: (sequence: string) => `ALTER SEQUENCE ${sequence} OWNED BY ${s.quoted}.outbox.position`,
    outboxGuard: outboxGuard(s),
    inboxGuard: inboxGuard(s),
    guardTrigger: (name: PartitionedTable) =>
      `CREATE TRIGGER ${name}_unique_across_partitions BEFORE INSERT ON ${table(name)}
         FOR EACH ROW EXECUTE FUNCTION ${s.quoted}.${name}_unique_across_partitions()`,
    attachLegacy: (name: PartitionedTable, legacy: string, toIso: string) =>
      `ALTER TABLE ${table(name)} ATTACH PARTITION ${table(legacy)} FOR VALUES FROM (MINVALUE) TO ('${toIso}')`,
    movePublication: (publication: string, legacy: string, name: PartitionedTable) => [
      `ALTER PUBLICATION ${quoteIdentifier(publication)} DROP TABLE ${table(legacy)}`,
      `ALTER PUBLICATION ${quoteIdentifier(publication)} ADD TABLE ${table(name)}`,
      `ALTER PUBLICATION ${quoteIdentifier(publication)} SET (publish_via_partition_root = true)`,
    ],
    createPartition: (
      name: PartitionedTable,
      partition: string,
      fromIso: string,
      toIso: string,
      storage: string[] | null,
    ) =>
      `CREATE TABLE ${table(partition)} PARTITION OF ${table(name)} FOR VALUES FROM ('${fromIso}') TO ('${toIso}')` +
      (storage && storage.length > 0 ? ` WITH (${storage.join(', ')})` : ''),
    localKeys: (name: PartitionedTable, partition: string) => {
      const keys = LOCAL_KEYS[name];
      const columns = (list: string[]) => list.map((c) => quoteIdentifier(c)).join(', ');
      return `ALTER TABLE ${table(partition)} ADD PRIMARY KEY (${columns(keys.primary)})${keys.unique
        .map((key) => `, ADD UNIQUE (${columns(key)})`)
        .join('')}`;
    },
    /** $1 the partition's quoted name: rows that keep an outbox partition (pending or failed). */
    unpublishedIn: (partition: string) =>
      `SELECT EXISTS (SELECT 1 FROM ${table(partition)} WHERE status <> 'published') AS held`,
    lockExclusive: (partition: string) => `LOCK TABLE ${table(partition)} IN ACCESS EXCLUSIVE MODE`,
    detach: (name: PartitionedTable, partition: string) =>
      `ALTER TABLE ${table(name)} DETACH PARTITION ${table(partition)}`,
    drop: (partition: string) => `DROP TABLE ${table(partition)}`,
    quotedTable: (name: string) => table(name),
  };
});
