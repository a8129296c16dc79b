/** Each module's SQL builder: built once per schema (the same object again), other text for another schema. No I/O. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { schemaRef, type SchemaRef } from '../../src/runtime/identifier.js';
import { opsSql } from '../../src/ops/sql.js';
import { outboxSql } from '../../src/outbox/sql.js';
import { reconcileSql } from '../../src/reconcile/sql.js';
import { cdcSql, relaySql } from '../../src/relay/sql.js';
import { migrateSql } from '../../src/schema/sql.js';
import { migrationSql } from '../../src/schema/migrate.js';

const builders: [string, (schema: SchemaRef) => Record<string, unknown>, (sql: never) => string][] = [
  ['opsSql', opsSql, (sql: ReturnType<typeof opsSql>) => sql.outboxStatus],
  ['outboxSql', outboxSql, (sql: ReturnType<typeof outboxSql>) => sql.insert],
  ['reconcileSql', reconcileSql, (sql: ReturnType<typeof reconcileSql>) => sql.repair],
  ['relaySql', relaySql, (sql: ReturnType<typeof relaySql>) => sql.claim],
  ['cdcSql', cdcSql, (sql: ReturnType<typeof cdcSql>) => sql.markPublished],
  ['migrateSql', migrateSql, (sql: ReturnType<typeof migrateSql>) => sql.script],
];

describe('SQL per schema, built once', () => {
  for (const [name, build, statement] of builders) {
    test(`${name}: the same object for the same schema, other text for another`, () => {
      const a = schemaRef('sql_per_schema_a');
      const b = schemaRef('sql_per_schema_b');
      assert.equal(build(a), build(a));
      assert.equal(build(a), build(schemaRef('sql_per_schema_a')));
      assert.notEqual(build(a), build(b));
      const textA = statement(build(a) as never);
      const textB = statement(build(b) as never);
      assert.match(textA, /"sql_per_schema_a"\./);
      assert.doesNotMatch(textA, /sql_per_schema_b/);
      assert.match(textB, /"sql_per_schema_b"\./);
      assert.equal(textA.replaceAll('sql_per_schema_a', 'sql_per_schema_b'), textB);
    });
  }

  test('every statement of every builder names the schema only in its quoted form', () => {
    const a = schemaRef('sql_per_schema_a');
    for (const [name, build] of builders) {
      for (const [key, text] of Object.entries(build(a))) {
        if (typeof text !== 'string') continue;
        for (const at of text.matchAll(/sql_per_schema_a/g)) {
          assert.equal(text[at.index - 1], '"', `${name}.${key} splices the raw name`);
        }
      }
    }
  });

  test('migrationSql returns the script built once for the schema', () => {
    assert.equal(migrationSql('sql_per_schema_a'), migrateSql(schemaRef('sql_per_schema_a')).script);
    assert.match(migrationSql(), /CREATE SCHEMA IF NOT EXISTS "converge";/);
  });
});
