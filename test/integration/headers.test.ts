/**
 * Converge's own headers (attempt, origin, replay) on the real broker: forged ones change no
 * bookkeeping and never reach SQL unbounded (issue 26, defects 3 and 4), and the ones converge
 * signs itself still count: retries climb to maxAttempts, a real replay records its outcome.
 */
import assert from 'node:assert/strict';
import type { Settlement } from '../../src/index.js';
import { listQuarantine, replayQuarantined } from '../../src/ops/index.js';
import { backendPid, describe, test, waitFor, orderEvent } from '../support/rig.js';
import { withBadInputRig } from '../support/badinput-rig.js';
import { capturingLogger } from '../support/consumer-env.js';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const invalid = (eventId: string) => json({ ...orderEvent(eventId), kind: 'sideways' });

describe('converge headers', () => {
  test('x-converge-attempt of 2^31-1 on an invalid message: quarantined at once, attempt 1, counted as untrusted', async () => {
    await withBadInputRig('cvhdr', async ({ db, publish, start }) => {
      const settled: Settlement[] = [];
      const consumer = start({ handlers: { AmountAdded: async () => undefined } });
      consumer.on('settled', (s) => settled.push(s));
      await consumer.ready();
      await publish('max-int', invalid('A-max'), { headers: { 'x-converge-attempt': 2_147_483_647 } });
      const done = await waitFor(
        () => settled.find((s) => s.action === 'ack' && s.outcome === 'quarantined'),
        'the message quarantined',
      );
      assert.deepEqual(done.untrustedHeaders, ['x-converge-attempt']);
      assert.equal(consumer.stats.retried, 0, 'the quarantine row was written the first time');
      const { rows } = await db.pool.query<{ attempts: number; reason: string }>(
        `SELECT attempts, reason FROM "${db.schema}".quarantine`,
      );
      assert.deepEqual(rows, [{ attempts: 1, reason: 'invalid-envelope' }]);
    });
  });

  test('a forged x-converge-attempt of 10^9 does not skip the retries of a failing handler', async () => {
    await withBadInputRig('cvhdr', async ({ db, publish, start }) => {
      const attempts: number[] = [];
      const consumer = start({
        maxAttempts: 3,
        handlers: {
          AmountAdded: async (_e, { attempt }) => {
            attempts.push(attempt);
            throw new Error('handler down');
          },
        },
      });
      await consumer.ready();
      await publish('forged-attempt', json(orderEvent('A-forged')), {
        messageId: 'A-forged',
        headers: { 'x-converge-attempt': 1_000_000_000 },
      });
      const rows = await waitFor(async () => {
        const { rows } = await db.pool.query<{ attempts: number; reason: string }>(
          `SELECT attempts, reason FROM "${db.schema}".quarantine`,
        );
        return rows.length > 0 ? rows : false;
      }, 'the event quarantined after its retries');
      assert.deepEqual(attempts, [1, 2, 3], 'each attempt ran, counted by the signed retry copies');
      assert.deepEqual(rows, [{ attempts: 3, reason: 'handler-failed' }]);
    });
  });

  test('a forged x-converge-replay-of records nothing; the real replay of that row records its outcome', async () => {
    await withBadInputRig('cvhdr', async ({ db, publisher, queue, publish, start }) => {
      const settled: Settlement[] = [];
      const logger = capturingLogger();
      const consumer = start({ handlers: { AmountAdded: async () => undefined }, logger });
      consumer.on('settled', (s) => settled.push(s));
      await consumer.ready();
      await publish('to-replay', invalid('R-bad'));
      const [row] = await waitFor(async () => {
        const rows = await listQuarantine(db.pool, { schema: db.schema });
        return rows.length === 1 ? rows : false;
      }, 'the invalid message quarantined');
      // A valid event claiming to replay that row, with a made-up token.
      await publish('forged-replay', json(orderEvent('R-forged')), {
        headers: { 'x-converge-replay-of': row!.id, 'x-converge-replay-token': 'ab'.repeat(16) },
      });
      const forged = await waitFor(
        () => settled.find((s) => s.action === 'ack' && s.outcome === 'applied'),
        'the forged replay applied as a plain event',
      );
      assert.deepEqual(forged.untrustedHeaders, ['x-converge-replay-of', 'x-converge-replay-token']);
      const open = await listQuarantine(db.pool, { schema: db.schema, includeResolved: true });
      assert.equal(open[0]!.replayOutcome, null, 'no outcome on a row nobody replayed');

      const before = { settled: settled.length, logged: logger.records.length };
      await replayQuarantined(db.pool, publisher, { id: row!.id, queue, schema: db.schema });
      const replayed = await waitFor(async () => {
        const rows = await listQuarantine(db.pool, { schema: db.schema, includeResolved: true });
        const original = rows.find((r) => r.id === row!.id);
        return original?.replayOutcome ? original : false;
      }, 'the replay outcome recorded').catch(async (err: Error) => {
        // What the consumer did after the replay, to tell a lost delivery from an unrecorded outcome.
        const rows = await listQuarantine(db.pool, { schema: db.schema, includeResolved: true });
        const seen = {
          settled: settled.slice(before.settled),
          log: logger.records.slice(before.logged, before.logged + 20),
          rows,
        };
        throw new Error(`${err.message}; since the replay: ${JSON.stringify(seen)}`);
      });
      assert.equal(replayed.replayOutcome, 'quarantined');
      assert.notEqual(replayed.replayQuarantineId, null);
    });
  });

  test('a replay whose transaction commits after the consumer got the copy still records its outcome there', async () => {
    await withBadInputRig('cvhdr', async ({ db, publisher, queue, publish, start }) => {
      const settled: Settlement[] = [];
      const consumer = start({ handlers: { AmountAdded: async () => undefined } });
      consumer.on('settled', (s) => settled.push(s));
      await consumer.ready();
      await publish('to-replay', invalid('L-bad'));
      await waitFor(() => settled.length === 1, 'the invalid message quarantined');
      const [row] = await listQuarantine(db.pool, { schema: db.schema });
      // The replay's transaction stays open after the broker confirmed the copy, as a slow
      // commit would: the consumer must wait for it rather than miss the token it stores.
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        await replayQuarantined(client, publisher, { id: row!.id, queue, schema: db.schema });
        const replayer = await backendPid(client);
        await waitFor(async () => {
          if (settled.length > 1) return true;
          const { rows } = await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [
            replayer,
          ]);
          return rows.length > 0;
        }, 'the consumer waiting for the replay, or settling without it');
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      const replayed = await waitFor(async () => {
        const rows = await listQuarantine(db.pool, { schema: db.schema, includeResolved: true });
        const original = rows.find((r) => r.id === row!.id);
        return original?.replayOutcome ? original : false;
      }, 'the replay outcome recorded');
      assert.equal(replayed.replayOutcome, 'quarantined');
      assert.notEqual(replayed.replayQuarantineId, null);
    });
  });
});
