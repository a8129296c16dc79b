// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
/**
 * One row PostgreSQL refuses to mark (a NOT VALID check it breaks, issue 26) never stops the CDC
 * relay. The row was published before its mark was refused: it is set aside as failed with the
 * constraint named, or, if even that is refused, its mark is retried with backoff (one log line
 * each) while the slot stays before its transaction, since acknowledging past a row whose outcome
 * is not written would leave it pending for good. The other rows are published and marked.
 */
import assert from 'node:assert/strict';
import { parseLsn } from '../../src/relay/cdc/lsn.js';
import type { RelayRetryInfo } from '../../src/index.js';
import { readStatus } from '../../src/ops/index.js';
import { describe, test, waitFor } from '../support/rig.js';
import { timedLog } from '../support/timed-log.js';
import { orderEvent, withCdcRig, type CdcRig } from '../support/cdc-fixture.js';

const BACKOFF = { initialDelayMs: 200, maxDelayMs: 2000, factor: 2 };
const SKIPPED = /refused to be marked failed too: skipped/;
const REASON = 'CONVERGE_OUTBOX_ROW_REFUSED: constraint test_poison (SQLSTATE 23514)';

/**
 * Valid events in transactions before and after a poison row's own, all streamed through the slot,
 * then a NOT VALID check the poison row breaks. Returns the WAL position just after the poison
 * transaction's commit: a slot confirmed below it was not acknowledged past the poison row.
 */
async function seed(rig: CdcRig, check: string): Promise<bigint> {
  await rig.createSlot();
  await rig.append(orderEvent('a', 1), orderEvent('b', 1));
  await rig.append(orderEvent('poison', 1));
  const { rows } = await rig.pool.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
  await rig.append(orderEvent('a', 2), orderEvent('b', 2));
  // Written before the rule existed: NOT VALID leaves it in place, but every UPDATE of it is checked.
  await rig.pool.query(`ALTER TABLE "${rig.schema}".outbox ADD CONSTRAINT test_poison CHECK (${check}) NOT VALID`);
  return parseLsn(rows[0]!.lsn);
}

async function confirmedFlush(rig: CdcRig): Promise<bigint> {
  const slot = await rig.slotInfo();
  return slot?.confirmedFlushLsn ? parseLsn(slot.confirmedFlushLsn) : 0n;
}

async function statuses(rig: CdcRig): Promise<Record<string, [string, string | null]>> {
  const rows = await rig.rows();
  return Object.fromEntries(
    rows.map((row) => [`${row.aggregate_id}-${row.aggregate_version}`, [row.status, row.last_error]]),
  );
}

/** The four valid events published (each in version order) and marked published. */
async function validOnesMarked(rig: CdcRig): Promise<void> {
  await waitFor(async () => {
    const now = await statuses(rig);
    return ['a-1', 'b-1', 'a-2', 'b-2'].every((key) => now[key]?.[0] === 'published');
  }, 'the four valid rows marked published');
  const order = rig.lastCopyOrder();
  assert.deepEqual(order.a, [1, 2]);
  assert.deepEqual(order.b, [1, 2]);
}

describe('CDC relay: a row the table refuses to mark', () => {
  test('a check that refuses the published mark only: the row is failed with the constraint named, the rest marked, the slot moves past it', async () => {
    await withCdcRig(async (rig) => {
      const afterPoison = await seed(rig, `status <> 'published' OR aggregate_id <> 'poison'`);
      const { logger, lines } = timedLog();
      rig.started({ logger, backoff: BACKOFF });
      await validOnesMarked(rig);
      await waitFor(async () => (await statuses(rig))['poison-1']?.[0] === 'failed', 'the poison row set aside');
      assert.deepEqual((await statuses(rig))['poison-1'], ['failed', REASON]);
      assert.ok(
        rig.received.some((r) => r.envelope.aggregateId === 'poison'),
        'it was published before its mark was refused',
      );
      const status = await readStatus(rig.pool, { schema: rig.schema });
      assert.deepEqual(status.outbox.failedReasons, { [REASON]: 1 });
      await waitFor(
        async () => (await confirmedFlush(rig)) > afterPoison,
        'the slot acknowledged past the set-aside row',
      );
      assert.deepEqual(
        lines.filter((line) => line.level === 'warn').map((line) => line.msg),
        [],
        'no failing cycle',
      );
      const setAside = lines.filter((line) => line.level === 'error');
      assert.equal(setAside.length, 1, 'one line for the row set aside');
      assert.match(JSON.stringify(setAside[0]!.fields), /constraint test_poison \(SQLSTATE 23514\)/);
      assert.doesNotMatch(JSON.stringify(lines), /poison"|"version"/, 'no payload in the log');
    });
  });

  test('a check that refuses even the failed mark: its mark is retried with backoff, the rest marked, the slot held before it until it is written', async () => {
    await withCdcRig(async (rig) => {
      const afterPoison = await seed(rig, `aggregate_id <> 'poison'`);
      const { logger, lines } = timedLog();
      rig.started({ logger, backoff: BACKOFF });
      await validOnesMarked(rig);
      await waitFor(() => lines.filter((line) => SKIPPED.test(line.msg)).length >= 3, 'three skip lines', 20_000);
      const warns = lines.filter((line) => line.level === 'warn');
      assert.deepEqual(
        warns.filter((line) => !SKIPPED.test(line.msg)).map((line) => line.msg),
        [],
        'no other warning (no failing cycle)',
      );
      const [first, , third] = warns;
      // Equal jitter: the first two delays are at least 100 and 200 ms; a tight loop would log far faster.
      assert.ok(third!.at - first!.at >= 300 - 5, `3 lines over ${Math.round(third!.at - first!.at)} ms`);
      assert.match(JSON.stringify(first!.fields), /constraint test_poison \(SQLSTATE 23514\)/);
      assert.deepEqual((await statuses(rig))['poison-1'], ['pending', null], 'left in place');
      assert.ok(
        (await confirmedFlush(rig)) < afterPoison,
        'the slot is not acknowledged past a published row whose mark is not written',
      );
      // The operator drops the rule: the next try marks the row, and the slot moves on.
      await rig.pool.query(`ALTER TABLE "${rig.schema}".outbox DROP CONSTRAINT test_poison`);
      await waitFor(
        async () => (await statuses(rig))['poison-1']?.[0] === 'published',
        'the held row marked once the table takes it',
        20_000,
      );
      await waitFor(async () => (await confirmedFlush(rig)) > afterPoison, 'the slot acknowledged past it');
    });
  });
  test('a returned event whose retry count the table refuses: the stream still stops and retries it with a growing backoff', async () => {
    await withCdcRig(async (rig) => {
      await rig.createSlot();
      // Nothing is bound to invoices: the broker returns the event, which counts as an attempt.
      await rig.append(orderEvent('poison', 1, { aggregateType: 'invoice' }));
      await rig.append(orderEvent('a', 1));
      await rig.pool.query(
        `ALTER TABLE "${rig.schema}".outbox ADD CONSTRAINT test_poison CHECK (aggregate_id <> 'poison') NOT VALID`,
      );
      const { logger, lines } = timedLog();
      const relay = rig.started({ logger, backoff: BACKOFF });
      const retries: (RelayRetryInfo & { at: number })[] = [];
      relay.on('retry', (info) => retries.push({ ...info, at: performance.now() }));
      const errors: Error[] = [];
      relay.on('error', (err) => errors.push(err));
      await waitFor(() => retries.length >= 3, 'the stream to stop at the returned event three times', 20_000);
      assert.deepEqual(errors, [], 'no session failure');
      assert.equal(new Set(retries.map((r) => r.eventId)).size, 1, 'always the same event');
      assert.deepEqual(
        retries.slice(0, 3).map((r) => r.attempts),
        [1, 2, 3],
        'counted in memory, so the backoff grows',
      );
      assert.ok(retries[2]!.at - retries[0]!.at >= 300 - 5, 'not a tight loop');
      const warns = lines.filter((line) => line.level === 'warn');
      assert.match(JSON.stringify(warns[0]?.fields), /constraint test_poison \(SQLSTATE 23514\)/);
      assert.deepEqual((await statuses(rig))['poison-1'], ['pending', null], 'the row is as it was');
      // Invoices are routed again: the event goes, its mark is refused and held, the one after it is marked.
      await rig.bind('invoice.#');
      await waitFor(async () => (await statuses(rig))['a-1']?.[0] === 'published', 'the event after it marked');
      assert.deepEqual((await statuses(rig))['poison-1'], ['pending', null]);
    }, 'order.#');
  });
});
