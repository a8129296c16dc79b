/** The version watch (projection/guard.ts): verdicts reported on a watched transaction, and only there. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, StaleVersionError, VersionGapError } from '../../src/errors.js';
import { projectionSchema, reportBlocked, watchVersions } from '../../src/projection/guard.js';
import { RetryTransactionSignal } from '../../src/db/transaction.js';

const key = { projection: 'p', aggregateType: 'order', aggregateId: '1' };

describe('version watch', () => {
  test('keeps the first verdict reported on the watched transaction and throws it on demand', () => {
    const tx = {};
    const watch = watchVersions(tx);
    watch.throwIfBlocked();
    const gap = new VersionGapError(key, 3, 1);
    assert.equal(reportBlocked(tx, gap), gap, 'returns the verdict, to be thrown');
    reportBlocked(tx, new StaleVersionError(key, 1, 2));
    assert.equal(watch.blocked, gap);
    assert.throws(
      () => watch.throwIfBlocked(),
      (err: unknown) => err === gap,
    );
    watch.end();
  });

  test('ignores verdicts on other transactions, and on this one once the watch ended', () => {
    const tx = {};
    const watch = watchVersions(tx);
    reportBlocked({}, new VersionGapError(key, 3, 1));
    assert.equal(watch.blocked, undefined);
    watch.end();
    reportBlocked(tx, new RetryTransactionSignal('late'));
    assert.equal(watch.blocked, undefined);
  });

  test('a new watch on a reused connection starts clean; ending the old one does not end the new one', () => {
    const tx = {};
    const first = watchVersions(tx);
    reportBlocked(tx, new VersionGapError(key, 3, 1));
    first.end();
    const second = watchVersions(tx);
    assert.equal(second.blocked, undefined);
    first.end();
    const signal = new RetryTransactionSignal('overtaken');
    reportBlocked(tx, signal);
    assert.equal(second.blocked, signal);
    second.end();
  });

  test("a consumer's transaction versions projections in the consumer's schema, and refuses another", () => {
    const tx = {};
    assert.equal(projectionSchema(tx, undefined), 'converge', 'unwatched: the default schema');
    assert.equal(projectionSchema(tx, 'reports'), 'reports');
    const watch = watchVersions(tx, 'orders_db');
    assert.equal(projectionSchema(tx, undefined), 'orders_db');
    assert.equal(projectionSchema(tx, 'orders_db'), 'orders_db');
    assert.throws(
      () => projectionSchema(tx, 'converge'),
      (err: unknown) => err instanceof ConfigError && err.field === 'schema',
    );
    watch.end();
    assert.equal(projectionSchema(tx, 'converge'), 'converge', 'the watch ended with the transaction');
  });
});
