/** SchemaRef: one validated value per schema name holding the raw and the quoted form; SQL per schema built once. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidIdentifierError } from '../../src/errors.js';
import { perSchema, schemaRef, type SchemaRef } from '../../src/runtime/identifier.js';
import { inboxSql } from '../../src/inbox/sql.js';
import { projectionSql } from '../../src/projection/sql.js';

describe('schemaRef', () => {
  test('holds the raw name and the quoted form', () => {
    const ref = schemaRef('orders_read');
    assert.equal(ref.name, 'orders_read');
    assert.equal(ref.quoted, '"orders_read"');
  });

  test('is made once per name, frozen', () => {
    assert.equal(schemaRef('converge'), schemaRef('converge'));
    assert.ok(Object.isFrozen(schemaRef('converge')));
  });

  test('rejects a name that is not a plain identifier, naming the option', () => {
    for (const name of ['"converge"', 'Converge', 'a-b', '', 'x; DROP TABLE y']) {
      assert.throws(
        () => schemaRef(name, 'consumer.schema'),
        (err: unknown) => err instanceof InvalidIdentifierError && err.message.includes('consumer.schema'),
      );
    }
  });

  test('a plain string is not a SchemaRef (type level)', () => {
    // @ts-expect-error a raw string cannot stand for a validated schema
    const raw: SchemaRef = 'converge';
    // @ts-expect-error nor can a look-alike object built by hand
    const forged: SchemaRef = { name: 'converge', quoted: '"converge"' };
    assert.equal(typeof raw, 'string');
    assert.equal(typeof forged, 'object');
  });
});

describe('SQL per schema', () => {
  test('is built once per schema and differs between schemas', () => {
    const a = schemaRef('schema_a');
    assert.equal(inboxSql(a), inboxSql(a));
    assert.equal(projectionSql(a), projectionSql(a));
    assert.notEqual(inboxSql(a), inboxSql(schemaRef('schema_b')));
    assert.match(inboxSql(a).insert, /"schema_a"\.inbox/);
    assert.match(projectionSql(a).advance, /"schema_a"\.projection_state/);
  });

  test('perSchema calls the builder once per SchemaRef', () => {
    let builds = 0;
    const sql = perSchema((schema) => {
      builds++;
      return { select: `SELECT 1 FROM ${schema.quoted}.t` };
    });
    sql(schemaRef('schema_a'));
    sql(schemaRef('schema_a'));
    sql(schemaRef('schema_b'));
    assert.equal(builds, 2);
  });
});
