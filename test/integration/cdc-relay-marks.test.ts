// test-files: heavy, starts a PostgreSQL 18 server of its own
// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
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
import { parseLsn } from '../../src/relay/cdc/lsn.js';
import type { CdcRelay, CdcRelayOptions } from '../../src/relay/index.js';
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

interface HeldCommit {
  eventId: string;
  /** The WAL insert position just before its COMMIT: its commit record is at or after it. */
  beforeCommit: bigint;
  /** Cancels the wait for the standby: the commit becomes visible (it was never undone). */
  release(): Promise<void>;
}

/**
 * An event appended in a transaction whose commit is in the WAL (so in the slot's stream) but
 * invisible until release(). `work` runs while it is held; the commit is released afterwards in
 * any case, since a commit left waiting would hold its locks and block the schema's drop.
 */
async function withHeldCommit(server: EmbeddedPostgres, rig: CdcRig, work: (held: HeldCommit) => Promise<void>) {
  const client = new pg.Client({ connectionString: server.url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL synchronous_commit = on');
    const { eventId } = await appendToOutbox(client, orderEvent('held', 1), { schema: rig.schema });
    const { rows } = await client.query<{ lsn: string; pid: number }>(
      'SELECT pg_current_wal_insert_lsn()::text AS lsn, pg_backend_pid() AS pid',
    );
    const committing = client.query('COMMIT');
    let released: Promise<void> | undefined;
    const release = () =>
      (released ??= (async () => {
        await rig.pool.query('SELECT pg_cancel_backend($1)', [rows[0]!.pid]);
        // PostgreSQL warns that the transaction committed locally: the COMMIT itself succeeds.
        await committing;
      })());
    try {
      await work({ eventId, beforeCommit: parseLsn(rows[0]!.lsn), release });
    } finally {
      await release();
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A relay on `rig` that records what it acknowledges and logs into `records`. */
async function tracedRelay(rig: CdcRig, hooks: CdcRelayOptions['hooks'] = {}) {
  await rig.createSlot();
  const logger = capturingLogger();
  const relay: CdcRelay = rig.started({ logger, markIntervalMs: 20, hooks });
  const acknowledged: bigint[] = [];
  relay.on('acknowledged', (lsn) => acknowledged.push(parseLsn(lsn)));
  await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
  const waitingReports = () => logger.records.filter((r) => r.includes('not visible in the outbox yet')).length;
  return { relay, acknowledged, waitingReports };
}

async function withHeldCommitServer(work: (server: EmbeddedPostgres, rig: CdcRig) => Promise<void>) {
  const server = await EmbeddedPostgres.start({ settings: HELD_COMMITS });
  try {
    await withCdcRig((rig) => work(server, rig), '#', server.url);
  } finally {
    await server.stop();
  }
}

test('a commit the slot sends before it is visible: the relay waits for its row, marks it, then acknowledges past it', async () => {
  await withHeldCommitServer(async (server, rig) => {
    const { acknowledged, waitingReports } = await tracedRelay(rig);
    const [before] = await rig.append(orderEvent('visible', 1));
    await waitFor(async () => (await statusOf(rig, before!)) === 'published', 'an ordinary event marked');
    await withHeldCommit(server, rig, async (held) => {
      await waitFor(
        () => rig.received.some((r) => r.envelope.eventId === held.eventId),
        'the held event published: the slot sent it before it became visible',
      );
      // Either way the relay shows what it did with the row it could not mark: held the slot back
      // (and said so on each flush), or acknowledged past it.
      await waitFor(
        () => waitingReports() >= 3 || acknowledged.some((lsn) => lsn >= held.beforeCommit),
        'the relay to hold the slot for the invisible row (three flushes) or to acknowledge past it',
      );
      assert.deepEqual(
        acknowledged.filter((lsn) => lsn >= held.beforeCommit),
        [],
        'the slot is not acknowledged past a transaction whose row is not marked',
      );
      assert.ok((await confirmedFlush(rig)) <= held.beforeCommit, 'the server has the slot where the relay left it');
      assert.equal(await statusOf(rig, held.eventId), undefined, 'the row is still invisible to other sessions');
      await held.release();
      await waitFor(
        async () => (await statusOf(rig, held.eventId)) === 'published',
        'the held row marked once visible',
      );
      await waitFor(
        async () => (await confirmedFlush(rig)) > held.beforeCommit,
        'the slot acknowledged past the held transaction',
      );
    });
  });
});

test('a commit that becomes visible between the mark and the second look is marked, not taken for done', async () => {
  await withHeldCommitServer(async (server, rig) => {
    let release: (() => Promise<void>) | undefined;
    let released = false;
    // The mark missed the row (invisible to its snapshot); it becomes visible before the relay looks again.
    const afterIncompleteMark = async () => {
      if (released || !release) return;
      released = true;
      await release();
    };
    await tracedRelay(rig, { afterIncompleteMark });
    await withHeldCommit(server, rig, async (held) => {
      release = () => held.release();
      await waitFor(() => released, 'a mark that missed the held row');
      await waitFor(
        async () => (await statusOf(rig, held.eventId)) === 'published',
        'the row, pending and visible at the second look, marked on a later flush',
      );
      await waitFor(
        async () => (await confirmedFlush(rig)) > held.beforeCommit,
        'the slot acknowledged past it once marked',
      );
    });
  });
});

test('a row its own transaction deleted is not waited for: the slot moves on past it', async () => {
  await withCdcRig(async (rig) => {
    const { waitingReports } = await tracedRelay(rig);
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
      waitingReports(),
      0,
      'a visible transaction whose row is gone is never taken for one still committing',
    );
  });
});
