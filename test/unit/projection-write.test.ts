/** The write-count rule of the projection helpers (src/projection/write.ts), without a database. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkWrite, rowsOf } from '../../src/projection/write.js';
import { watchVersions } from '../../src/projection/guard.js';
import { NoRowsWrittenError } from '../../src/runtime/errors.js';

const one = { aggregateType: 'order', aggregateId: 'o-1', version: 1 };

describe('checkWrite', () => {
  it('accepts a query result, a count or a report of "unchanged" that meets the expectation', () => {
    const tx = {};
    checkWrite(tx, { rows: [], rowCount: 1 }, 1, 'p', one);
    checkWrite(tx, 3, 3, 'p', { aggregates: 3, events: 4 });
    checkWrite(tx, 'unchanged', 1, 'p', one);
    checkWrite(tx, { rows: [], rowCount: 0 }, 0, 'p', one);
  });

  it('throws NoRowsWrittenError for fewer rows; a null rowCount, NaN or a missing return count as 0', () => {
    for (const result of [{ rows: [], rowCount: 0 }, { rows: [], rowCount: null }, 0, Number.NaN, undefined, null]) {
      assert.throws(
        () => checkWrite({}, result as never, 1, 'order_view', one),
        (err: unknown) => err instanceof NoRowsWrittenError && err.rowCount === 0 && err.expected === 1,
      );
    }
    assert.throws(
      () => checkWrite({}, 2, 3, 'order_view', { aggregates: 3, events: 5 }),
      (err: unknown) =>
        err instanceof NoRowsWrittenError &&
        err.code === 'CONVERGE_NO_ROWS_WRITTEN' &&
        err.message.startsWith(
          'the batch write of 5 events (3 aggregates) in order_view changed 2 rows, expected at least 3',
        ),
    );
  });

  it("names the aggregate and the fix, and is reported on the transaction's watch so catching it cannot commit", () => {
    const tx = {};
    const watch = watchVersions(tx);
    try {
      assert.throws(
        () => checkWrite(tx, 0, 1, 'order_view', one),
        /the write of order\/o-1 version 1 in order_view changed 0 rows.*ON CONFLICT DO UPDATE.*'unchanged'/,
      );
      assert.ok(watch.blocked instanceof NoRowsWrittenError);
      assert.throws(() => watch.throwIfBlocked(), NoRowsWrittenError);
    } finally {
      watch.end();
    }
  });
});

describe("rowsOf: each library's own result, as it comes", () => {
  it('counts what node-postgres, Drizzle, Kysely, knex, TypeORM and MikroORM return', () => {
    const cases: [string, unknown, number][] = [
      ['pg / Drizzle QueryResult', { rows: [], rowCount: 2 }, 2],
      ['Kysely InsertResult', { insertId: undefined, numInsertedOrUpdatedRows: 1n }, 1],
      ['Kysely UpdateResult', { numUpdatedRows: 3n, numChangedRows: 2n }, 3],
      ['Kysely DeleteResult', { numDeletedRows: 1n }, 1],
      ['Kysely sql`...`.execute()', { rows: [], numAffectedRows: 4n }, 4],
      [
        'Kysely execute(): one result per query',
        [{ numInsertedOrUpdatedRows: 1n }, { numInsertedOrUpdatedRows: 2n }],
        3,
      ],
      ['knex update / delete: a count', 5, 5],
      ['rows a RETURNING gave back (knex, Drizzle)', [{ event_id: 'a' }, { event_id: 'b' }], 2],
      ['TypeORM UpdateResult', { raw: [], affected: 1, generatedMaps: [] }, 1],
      ['TypeORM InsertResult', { identifiers: [{ id: 'a' }, { id: 'b' }], generatedMaps: [], raw: [] }, 2],
      ['MikroORM execute("run")', { affectedRows: 1, insertId: 0, rows: [] }, 1],
      ['a bigint count', 7n, 7],
    ];
    for (const [library, result, rows] of cases) assert.equal(rowsOf(result), rows, library);
  });

  it('counts 0 for a result that reports none, so checkWrite still fails the write', () => {
    for (const result of [
      { numUpdatedRows: 0n },
      { numInsertedOrUpdatedRows: undefined },
      { affected: undefined, raw: [] },
      { affected: null },
      [],
      { id: 'o-1', amount: 5 }, // an entity, as TypeORM's save() returns: no count at all
      'written',
    ])
      assert.equal(
        rowsOf(result),
        0,
        JSON.stringify(result, (_key, value: unknown) => (typeof value === 'bigint' ? `${value}n` : value)),
      );
    assert.throws(() => checkWrite({}, { numUpdatedRows: 0n }, 1, 'order_view', one), NoRowsWrittenError);
  });
});
