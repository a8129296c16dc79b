import type { SchemaRef } from '../runtime/identifier.js';
import type { PartitionedTable } from './partition-plan.js';

/**
 * A fillfactor for the outbox or the inbox on either layout, as one statement. A plain table takes it
 * directly. A partitioned parent cannot hold storage parameters (PostgreSQL refuses them), so each
 * existing partition takes it, and `partition_layout.storage`, which every new partition is created
 * with (partitioning.ts), has its fillfactor replaced. New pages only, as for any fillfactor.
 */
export function tableFillfactor(table: PartitionedTable, fillfactor: number): (s: SchemaRef) => string[] {
  if (!Number.isInteger(fillfactor) || fillfactor < 10 || fillfactor > 100)
    throw new RangeError(`fillfactor ${fillfactor} is outside 10..100`);
  return (s) => {
    const quoted = `${s.quoted}.${table}`;
    return [
      `DO $$
       DECLARE part regclass;
       BEGIN
         IF (SELECT relkind FROM pg_class WHERE oid = '${quoted}'::regclass) <> 'p' THEN
           ALTER TABLE ${quoted} SET (fillfactor = ${fillfactor});
           RETURN;
         END IF;
         UPDATE ${s.quoted}.partition_layout
            SET storage = array_append(
                  ARRAY(SELECT o FROM unnest(coalesce(storage, '{}')) AS o WHERE o NOT LIKE 'fillfactor=%'),
                  'fillfactor=${fillfactor}')
          WHERE table_name = '${table}';
         FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = '${quoted}'::regclass LOOP
           EXECUTE format('ALTER TABLE %s SET (fillfactor = ${fillfactor})', part);
         END LOOP;
       END $$`,
    ];
  };
}
