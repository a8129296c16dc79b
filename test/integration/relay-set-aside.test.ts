/**
 * One row PostgreSQL refuses to update (a NOT VALID check it breaks, issue 26) never stops the relay:
 * it is set aside as failed with the constraint named, or, if even that is refused, skipped with
 * backoff and logged once per backoff; the other rows are published in order per aggregate.
 */
import assert from 'node:assert/strict';
import { readStatus } from '../../src/ops/index.js';
import { describe, test, waitFor } from '../support/rig.js';
import { timedLog, type TimedLine as Line } from '../support/timed-log.js';
import { event, withRig, type Rig } from '../support/relay-rig.js';

const BACKOFF = { initialDelayMs: 200, maxDelayMs: 2000, factor: 2 };
const SKIPPED = /refused to be marked failed too: skipped/;

/** Valid events of two aggregates and a poison row (plus a later version of its aggregate) under a NOT VALID check. */
async function seed(rig: Rig, check: string): Promise<void> {
  await rig.append(event('a', 1), event('poison', 1), event('a', 2), event('poison', 2), event('b', 1), event('a', 3));
  // Written before the rule existed: NOT VALID leaves it in place, but every UPDATE of it is checked.
  await rig.db.pool.query(`ALTER TABLE ${rig.outbox} ADD CONSTRAINT test_poison CHECK (${check}) NOT VALID`);
}

async function publishedInOrder(rig: Rig, queue: string): Promise<string[]> {
  const seen: string[] = [];
  await waitFor(async () => {
    for (const message of await rig.drain(queue)) {
      const body = JSON.parse(message.content.toString()) as { aggregateId: string; aggregateVersion: number };
      if (body.aggregateId !== 'poison') seen.push(`${body.aggregateId}-${body.aggregateVersion}`);
    }
    return seen.length >= 4;
  }, 'the four valid events published');
  return seen;
}

function assertOrdered(seen: string[]): void {
  assert.deepEqual(
    seen.filter((id) => id.startsWith('a-')),
    ['a-1', 'a-2', 'a-3'],
  );
  assert.deepEqual([...seen].sort(), ['a-1', 'a-2', 'a-3', 'b-1']);
}

/** Skipped with backoff: only skip lines, each at least the backoff's lower bound after the one before. */
async function assertBackedOff(lines: Line[]): Promise<void> {
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
}

describe('relay: a row the table refuses', () => {
  for (const claim of ['lease', 'exclusive'] as const) {
    test(`${claim} claim: a check that binds pending rows only: the row is failed with the constraint named, the rest published in order`, async () => {
      await withRig(async (rig) => {
        const queue = await rig.queue('#');
        await seed(rig, `status <> 'pending' OR aggregate_id <> 'poison'`);
        const { logger, lines } = timedLog();
        rig.started({ claim, logger, backoff: BACKOFF });
        assertOrdered(await publishedInOrder(rig, queue));
        const rows = await rig.rows();
        const poison = rows.filter((row) => row.aggregate_id === 'poison');
        if (claim === 'lease') {
          // The lease claim writes the row: refused, so it is set aside.
          assert.deepEqual(
            poison.map((row) => [row.status, row.last_error]),
            [
              ['failed', 'CONVERGE_OUTBOX_ROW_REFUSED: constraint test_poison (SQLSTATE 23514)'],
              ['pending', null],
            ],
          );
          const status = await readStatus(rig.db.pool, { schema: rig.schema });
          assert.deepEqual(status.outbox.failedReasons, {
            'CONVERGE_OUTBOX_ROW_REFUSED: constraint test_poison (SQLSTATE 23514)': 1,
          });
        } else {
          // The exclusive claim only reads; marking it published leaves the rule's scope.
          assert.equal(poison[0]!.status, 'published');
        }
        assert.deepEqual(
          lines.filter((line) => line.level === 'warn').map((line) => line.msg),
          [],
          'no failing cycle',
        );
      });
    });

    test(`${claim} claim: a check that refuses even the failed mark: the row is skipped with backoff, the rest published in order`, async () => {
      await withRig(async (rig) => {
        const queue = await rig.queue('#');
        await seed(rig, `aggregate_id <> 'poison'`);
        const { logger, lines } = timedLog();
        rig.started({ claim, logger, backoff: BACKOFF });
        assertOrdered(await publishedInOrder(rig, queue));
        await assertBackedOff(lines);
        const poison = (await rig.rows()).filter((row) => row.aggregate_id === 'poison');
        assert.deepEqual(
          poison.map((row) => row.status),
          ['pending', 'pending'],
          'left in place, holding back only its own aggregate',
        );
      });
    });
  }
});
