/**
 * The CDC relay's marks against what the slot sends: a transaction arrives through the slot once
 * its commit record is flushed, which can be before the committing backend makes it visible. A
 * relay that marked, found nothing and acknowledged anyway would leave that row pending for good
 * (CI's CDC chaos pass once ended with one such row). Here a PostgreSQL of the test's own holds a
 * commit in that state for as long as it likes: synchronous replication to a standby that never
 * connects keeps the committing session waiting after its commit is in the WAL and before anyone
 * can see it, until the wait is cancelled.
 */
import assert from 'node:assert/strict';
import pg from 'pg';
import { appendToOutbox } from '../../src/index.js';
import { parseLsn } from '../../src/cdc/lsn.js';
import { EmbeddedPostgres } from '../../kit/embedded-postgres.js';
import { test, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig, type CdcRig } from '../support/cdc-fixture.js';
import { capturingLogger } from '../support/consumer-env.js';

/** Commits wait for a standby only in sessions that ask for it (synchronous_commit = on). */
const HELD_COMMITS = {
  wal_level: 'logical',
  synchronous_standby_names: 'converge_never_connects',
  synchronous_commit: 'local',
};

async function statusOf(rig: CdcRig, eventId: string): Promise<string | undefined> {
  const { rows } = await rig.pool.query<{ status: string }>(
    `SELECT status FROM "${rig.schema}".outbox WHERE event_id = $1`,
    [eventId],
  );
  return rows[0]?.status;
}

async function confirmedFlush(rig: CdcRig): Promise<bigint> {
  const slot = await rig.slotInfo();
  assert.ok(slot?.confirmedFlushLsn, 'the slot has a confirmed position');
  return parseLsn(slot.confirmedFlushLsn);
}

test('a commit the slot sends before it is visible: the relay waits for its row, marks it, then acknowledges past it', async () => {
  const server = await EmbeddedPostgres.start({ settings: HELD_COMMITS });
  const held = new pg.Client({ connectionString: server.url });
  held.on('error', () => undefined);
  try {
    await withCdcRig(
      async (rig) => {
        await rig.createSlot();
        const logger = capturingLogger();
        const invisibleReports = () => logger.records.filter((r) => r.includes('not visible in the outbox yet')).length;
        const relay = rig.started({ logger, markIntervalMs: 20 });
        const acknowledged: string[] = [];
        relay.on('acknowledged', (lsn) => acknowledged.push(lsn));
        await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
        const [before] = await rig.append(orderEvent('visible', 1));
        await waitFor(async () => (await statusOf(rig, before!)) === 'published', 'an ordinary event marked');

        await held.connect();
        await held.query('BEGIN');
        await held.query('SET LOCAL synchronous_commit = on');
        const { eventId } = await appendToOutbox(held, orderEvent('held', 1), { schema: rig.schema });
        const { rows } = await held.query<{ lsn: string; pid: number }>(
          'SELECT pg_current_wal_insert_lsn()::text AS lsn, pg_backend_pid() AS pid',
        );
        const beforeCommit = parseLsn(rows[0]!.lsn);
        // In the WAL (so in the slot's stream) but invisible until the wait for the standby is cancelled.
        const committing = held.query('COMMIT');
        // Whatever fails below: a commit left waiting would hold its locks and block the schema's drop.
        const release = () => rig.pool.query('SELECT pg_cancel_backend($1)', [rows[0]!.pid]);
        try {
          await waitFor(
            () => rig.received.some((r) => r.envelope.eventId === eventId),
            'the held event published: the slot sent it before it became visible',
          );
          // Either way the relay shows what it did with the row it could not mark: held the slot back
          // (and said so on each flush), or acknowledged past it.
          await waitFor(
            () => invisibleReports() >= 3 || acknowledged.some((lsn) => parseLsn(lsn) >= beforeCommit),
            'the relay to hold the slot for the invisible row (three flushes) or to acknowledge past it',
          );
          assert.deepEqual(
            acknowledged.filter((lsn) => parseLsn(lsn) >= beforeCommit),
            [],
            'the slot is not acknowledged past a transaction whose row is not marked',
          );
          assert.ok((await confirmedFlush(rig)) <= beforeCommit, 'the server has the slot where the relay left it');
          assert.equal(await statusOf(rig, eventId), undefined, 'the row is still invisible to other sessions');
        } finally {
          await release();
        }
        // Cancelling the wait does not undo the commit: PostgreSQL warns and the transaction stays committed.
        await committing;
        await waitFor(async () => (await statusOf(rig, eventId)) === 'published', 'the held row marked once visible');
        await waitFor(
          async () => (await confirmedFlush(rig)) > beforeCommit,
          'the slot acknowledged past the held transaction',
        );
      },
      '#',
      server.url,
    );
  } finally {
    await held.end().catch(() => undefined);
    await server.stop();
  }
});

test('a row its own transaction deleted is not waited for: the slot moves on past it', async () => {
  await withCdcRig(async (rig) => {
    await rig.createSlot();
    const logger = capturingLogger();
    const relay = rig.started({ logger, markIntervalMs: 20 });
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
    const client = await rig.pool.connect();
    let gone: string;
    let beforeCommit: bigint;
    try {
      await client.query('BEGIN');
      gone = (await appendToOutbox(client, orderEvent('gone', 1), { schema: rig.schema })).eventId;
      // The slot carries inserts only: the relay sees the insert, never the delete.
      await client.query(`DELETE FROM "${rig.schema}".outbox WHERE event_id = $1`, [gone]);
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      beforeCommit = parseLsn(rows[0]!.lsn);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const [after] = await rig.append(orderEvent('after', 1));
    await waitFor(
      () => rig.received.some((r) => r.envelope.eventId === gone),
      'the deleted row published from the stream',
    );
    await waitFor(async () => (await statusOf(rig, after!)) === 'published', 'the next event marked');
    await waitFor(async () => (await confirmedFlush(rig)) > beforeCommit, 'the slot acknowledged past the deletion');
    assert.equal(
      logger.records.filter((r) => r.includes('not visible in the outbox yet')).length,
      0,
      'a visible transaction whose row is gone is never taken for one still committing',
    );
  });
});
