import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { schemaRef } from '../../src/runtime/identifier.js';
import { tableFillfactor } from '../../src/schema/table-storage.js';

describe('tableFillfactor', () => {
  it('sets the plain table directly, and a partitioned one through its partitions and the recorded layout', () => {
    const [statement] = tableFillfactor('outbox', 45)(schemaRef('app'));
    assert.match(statement!, /ALTER TABLE "app"\.outbox SET \(fillfactor = 45\)/);
    assert.match(statement!, /UPDATE "app"\.partition_layout[\s\S]*'fillfactor=45'[\s\S]*WHERE table_name = 'outbox'/);
    assert.match(statement!, /inhparent = '"app"\.outbox'::regclass/);
    assert.match(statement!, /ALTER TABLE %s SET \(fillfactor = 45\)/);
  });

  it('refuses a fillfactor PostgreSQL would refuse', () => {
    for (const value of [5, 101, 45.5]) assert.throws(() => tableFillfactor('inbox', value), RangeError);
  });
});
