/**
 * The one COMMIT helper (db/transaction.ts) every converge commit goes through, withTransaction
 * and migrate included: PostgreSQL answers COMMIT on an aborted transaction with the command tag
 * ROLLBACK and no error, and that answer must reject. Integration: test/integration/transaction.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commit, isTransientDatabaseError } from '../../src/db/transaction.js';
import { CommitRolledBackError } from '../../src/runtime/errors.js';

/** A client that answers every statement with `tag`, recording what it was sent. */
function answering(tag: string) {
  const sent: string[] = [];
  return {
    sent,
    client: {
      query: async (text: string) => {
        sent.push(text);
        return { command: tag, rowCount: null, rows: [], oid: 0, fields: [] };
      },
    },
  };
}

describe('commit', () => {
  it('resolves when PostgreSQL answers COMMIT with COMMIT', async () => {
    const { client, sent } = answering('COMMIT');
    await commit(client as never);
    assert.deepEqual(sent, ['COMMIT']);
  });

  it('rejects with CommitRolledBackError when PostgreSQL answers COMMIT with ROLLBACK; the message names no data', async () => {
    const { client } = answering('ROLLBACK');
    await assert.rejects(commit(client as never), (err: unknown) => {
      assert.ok(err instanceof CommitRolledBackError);
      assert.equal(err.code, 'CONVERGE_COMMIT_ROLLED_BACK');
      assert.match(err.message, /SAVEPOINT/);
      return true;
    });
  });
});

describe('isTransientDatabaseError', () => {
  it('waits out an inbox without a partition for now, but not a check constraint or another table', () => {
    const noPartition = { code: '23514', table: 'inbox', schema: 'converge' };
    assert.equal(isTransientDatabaseError(noPartition), true);
    assert.equal(isTransientDatabaseError({ ...noPartition, constraint: 'inbox_check' }), false);
    assert.equal(isTransientDatabaseError({ ...noPartition, table: 'orders' }), false);
    assert.equal(isTransientDatabaseError({ code: '23505', table: 'inbox' }), false);
  });
});
