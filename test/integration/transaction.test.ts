/**
 * withTransaction and converge's own retry signal: a RetryTransactionSignal re-runs the whole
 * transaction like a serialization failure; applyIncrements raises it (instead of a made-up
 * PostgreSQL error) when a concurrent transaction started an aggregate it planned to start.
 * A COMMIT that PostgreSQL answers with ROLLBACK (the work caught an SQL error) rejects.
 */
import assert from 'node:assert/strict';
import {
  RetryTransactionSignal,
  isSerializationFailure,
  isTransientDatabaseError,
  withTransaction,
} from '../../src/db/transaction.js';
import { appendToOutbox, applyIncrements } from '../../src/index.js';
import { CommitRolledBackError, StaleVersionError } from '../../src/errors.js';
import { orderEvent } from '../support/builders.js';
import { describe, it, createTestSchema } from '../support/rig.js';

describe('withTransaction and a COMMIT answered by ROLLBACK', () => {
  it('rejects with CommitRolledBackError when the work caught an SQL error; nothing was written, nothing re-run', async () => {
    const db = await createTestSchema('cvt_tx');
    try {
      await db.pool.query(`CREATE TABLE "${db.schema}".orders (id text PRIMARY KEY)`);
      await db.pool.query(`INSERT INTO "${db.schema}".orders (id) VALUES ('o1')`);
      let runs = 0;
      const stored = withTransaction(db.pool, async (tx) => {
        runs++;
        await tx.query(`INSERT INTO "${db.schema}".orders (id) VALUES ('o2')`);
        await appendToOutbox(tx, orderEvent('e-commit-1', 'o2'), { schema: db.schema });
        try {
          // The duplicate a careless producer "ignores": it aborts the transaction.
          await tx.query(`INSERT INTO "${db.schema}".orders (id) VALUES ('o1')`);
        } catch {
          // swallowed on purpose
        }
        return 'stored';
      });
      await assert.rejects(stored, (err: unknown) => {
        assert.ok(err instanceof CommitRolledBackError, `got ${String(err)}`);
        assert.equal(err.code, 'CONVERGE_COMMIT_ROLLED_BACK');
        return true;
      });
      assert.equal(runs, 1, 'not re-run: the same work would catch the same error');
      const orders = await db.pool.query(`SELECT id FROM "${db.schema}".orders ORDER BY id`);
      assert.deepEqual(orders.rows, [{ id: 'o1' }], 'the business row did not commit');
      const outbox = await db.pool.query(`SELECT 1 FROM "${db.schema}".outbox`);
      assert.equal(outbox.rowCount, 0, 'the outbox row did not commit');
      // The connection went back to the pool usable, outside any transaction.
      const after = await withTransaction(db.pool, async (tx) => {
        await tx.query(`INSERT INTO "${db.schema}".orders (id) VALUES ('o3')`);
        return 'ok';
      });
      assert.equal(after, 'ok');
    } finally {
      await db.close();
    }
  });
});

describe('RetryTransactionSignal', () => {
  it('counts as a serialization failure (so also as transient), and is no PostgreSQL error', () => {
    const signal = new RetryTransactionSignal('overtaken');
    assert.equal(isSerializationFailure(signal), true);
    assert.equal(isTransientDatabaseError(signal), true);
    assert.equal((signal as { code?: unknown }).code, undefined);
    assert.equal(signal.name, 'RetryTransactionSignal');
  });

  it('makes withTransaction run the whole transaction again, and gives up after the retries with the signal itself', async () => {
    const db = await createTestSchema('cvt_tx');
    try {
      await db.pool.query(`CREATE TABLE "${db.schema}".marks (n integer)`);
      let runs = 0;
      const result = await withTransaction(db.pool, async (tx) => {
        runs++;
        await tx.query(`INSERT INTO "${db.schema}".marks (n) VALUES ($1)`, [runs]);
        if (runs === 1) throw new RetryTransactionSignal('overtaken');
        return 'second run';
      });
      assert.equal(result, 'second run');
      assert.equal(runs, 2);
      const { rows } = await db.pool.query(`SELECT n FROM "${db.schema}".marks`);
      assert.deepEqual(rows, [{ n: 2 }], 'the first run rolled back whole');

      let attempts = 0;
      await assert.rejects(
        withTransaction(
          db.pool,
          async () => {
            attempts++;
            throw new RetryTransactionSignal('always overtaken');
          },
          2,
        ),
        (err: unknown) => err instanceof RetryTransactionSignal,
      );
      assert.equal(attempts, 3);
    } finally {
      await db.close();
    }
  });

  it('applyIncrements raises it when a concurrent transaction starts an aggregate it planned to start; the re-run judges the new state', async () => {
    const db = await createTestSchema('cvt_tx');
    const schema = db.schema;
    const other = await db.pool.connect();
    try {
      // z is covered by a baseline so the batch (z 3, z 6, x 1) is not one consecutive run: the planned path, with a fresh start for x.
      await db.pool.query(
        `INSERT INTO "${schema}".projection_state (projection, aggregate_type, aggregate_id, version, baseline_version) VALUES ('p', 'order', 'z', 5, 5)`,
      );
      const events = [
        { aggregateType: 'order', aggregateId: 'z', aggregateVersion: 3 },
        { aggregateType: 'order', aggregateId: 'z', aggregateVersion: 6 },
        { aggregateType: 'order', aggregateId: 'x', aggregateVersion: 1 },
      ];
      await other.query('BEGIN');
      await other.query(
        `INSERT INTO "${schema}".projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('p', 'order', 'x', 1)`,
      );
      const thrown: unknown[] = [];
      const run = withTransaction(db.pool, async (tx) => {
        try {
          return await applyIncrements(tx, { projection: 'p', events, schema }, async () => 'unchanged');
        } catch (err) {
          thrown.push(err);
          throw err;
        }
      });
      // Judged from now on: on a busy machine the re-run can reject before `await COMMIT` below resumes,
      // and a rejection nothing handles yet fails the file (unhandledRejection).
      const rejected = assert.rejects(run, (err: unknown) => err instanceof StaleVersionError);
      // Our first run plans x as new, then waits on the other transaction's uncommitted row for x: commit it now.
      for (;;) {
        const { rows } = await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`,
          [`"${schema}".projection_state`],
        );
        if (rows[0]!.n > 0) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      await other.query('COMMIT');
      await rejected;
      assert.equal(thrown.length, 2, 'the transaction ran twice');
      assert.ok(thrown[0] instanceof RetryTransactionSignal, 'the first run was overtaken');
      assert.ok(thrown[1] instanceof StaleVersionError, 'the re-run sees x already at version 1');
    } finally {
      other.release();
      await db.close();
    }
  });
});
