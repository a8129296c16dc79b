import assert from 'node:assert/strict';
import type pg from 'pg';
import type { Executor } from '../../src/db/executor.js';
import { withTransaction } from '../../src/db/transaction.js';
import type { NewEvent } from '../../src/envelope/envelope.js';
import { ConcurrencyConflictError, EnvelopeValidationError, InvalidIdentifierError } from '../../src/runtime/errors.js';
import { appendManyToOutbox, appendToOutbox, updateExactlyOne } from '../../src/outbox/append.js';
import {
  after,
  before,
  beforeEach,
  describe,
  it,
  type TestDatabase,
  createTestSchema,
  waitFor,
} from '../support/rig.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let db: TestDatabase;
let schema: string;
let orders: string;
let outbox: string;

before(async () => {
  db = await createTestSchema('cvt_outbox');
  schema = db.schema;
  orders = `"${schema}".orders`;
  outbox = `"${schema}".outbox`;
  // A stand-in for the service's own table, living next to the outbox like in a real service.
  await db.pool.query(`CREATE TABLE ${orders} (id text PRIMARY KEY, status text NOT NULL, version integer NOT NULL)`);
});

after(async () => {
  await db?.close();
});

beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${orders}, ${outbox}`);
});

function orderEvent(id: string, version: number, overrides: Partial<NewEvent> = {}): NewEvent {
  return {
    aggregateType: 'order',
    aggregateId: id,
    aggregateVersion: version,
    eventType: 'OrderPlaced',
    payload: { id, total: 42 },
    ...overrides,
  };
}

/** Runs `work` in an explicit transaction on one checked-out connection, the way a service would. */
async function inTransaction<T>(
  work: (client: pg.PoolClient) => Promise<T>,
  end: 'COMMIT' | 'ROLLBACK' = 'COMMIT',
): Promise<T> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query(end);
    return result;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}

async function outboxRows(): Promise<Array<Record<string, unknown>>> {
  const { rows } = await db.pool.query<Record<string, unknown>>(`SELECT * FROM ${outbox} ORDER BY position`);
  return rows;
}

async function orderRows(): Promise<Array<{ id: string; status: string; version: number }>> {
  const { rows } = await db.pool.query<{ id: string; status: string; version: number }>(
    `SELECT * FROM ${orders} ORDER BY id`,
  );
  return rows;
}

describe('appendToOutbox', () => {
  it('commits the event together with the business row', async () => {
    const appended = await inTransaction(async (client) => {
      await client.query(`INSERT INTO ${orders} (id, status, version) VALUES ('o1', 'placed', 1)`);
      return appendToOutbox(client, orderEvent('o1', 1), { schema });
    });
    assert.match(appended.position, /^\d+$/);
    assert.deepEqual(await orderRows(), [{ id: 'o1', status: 'placed', version: 1 }]);
    const rows = await outboxRows();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.event_id, appended.eventId);
    assert.equal(String(rows[0]!.position), appended.position);
  });

  it('is invisible to other connections until commit', async () => {
    await inTransaction(async (client) => {
      await appendToOutbox(client, orderEvent('o1', 1), { schema });
      assert.deepEqual(await outboxRows(), []);
    });
    assert.equal((await outboxRows()).length, 1);
  });

  it('leaves neither the business row nor the event after ROLLBACK', async () => {
    await inTransaction(async (client) => {
      await client.query(`INSERT INTO ${orders} (id, status, version) VALUES ('o1', 'placed', 1)`);
      await appendToOutbox(client, orderEvent('o1', 1), { schema });
    }, 'ROLLBACK');
    assert.deepEqual(await orderRows(), []);
    assert.deepEqual(await outboxRows(), []);
  });

  it("defaults eventId to a random UUID and occurred_at to the transaction's now()", async () => {
    const { appended, matchesNow } = await inTransaction(async (client) => {
      // now() is fixed at transaction start; the pause makes it distinguishable from the insert's wall-clock time.
      await client.query(`SELECT pg_sleep(0.01)`);
      const appended = await appendToOutbox(client, orderEvent('o1', 1), { schema });
      const { rows } = await client.query<{ matches_now: boolean; before_insert: boolean }>(
        `SELECT occurred_at = now() AS matches_now, occurred_at <= clock_timestamp() - interval '10 milliseconds' AS before_insert
           FROM ${outbox} WHERE event_id = $1`,
        [appended.eventId],
      );
      assert.equal(rows[0]!.before_insert, true);
      return { appended, matchesNow: rows[0]!.matches_now };
    });
    assert.match(appended.eventId, UUID);
    assert.equal(matchesNow, true);
    const second = await inTransaction((client) => appendToOutbox(client, orderEvent('o1', 2), { schema }));
    assert.notEqual(second.eventId, appended.eventId);
  });

  it('stores every field, applies defaults, and keeps explicit values', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await inTransaction(async (client) => {
      await appendToOutbox(client, orderEvent('o1', 1), { schema });
      await appendToOutbox(
        client,
        {
          eventId: 'evt-explicit-1',
          aggregateType: 'order',
          aggregateId: 1234,
          aggregateVersion: 5,
          eventType: 'OrderSnapshot',
          schemaVersion: 3,
          kind: 'snapshot',
          payload: { lines: [{ sku: 'a', qty: 2 }], note: null },
          occurredAt: new Date('2024-05-01T10:00:00.123Z'),
          traceparent,
          tenantId: 'tenant-a',
        },
        { schema },
      );
    });
    const [defaulted, explicit] = await outboxRows();
    assert.ok(defaulted && explicit);
    assert.equal(defaulted.schema_version, 1);
    assert.equal(defaulted.kind, 'incremental');
    assert.equal(defaulted.traceparent, null);
    assert.equal(defaulted.tenant_id, null);
    assert.equal(defaulted.status, 'pending');

    assert.equal(explicit.event_id, 'evt-explicit-1');
    assert.equal(explicit.aggregate_type, 'order');
    assert.equal(explicit.aggregate_id, '1234');
    assert.equal(String(explicit.aggregate_version), '5');
    assert.equal(explicit.event_type, 'OrderSnapshot');
    assert.equal(explicit.schema_version, 3);
    assert.equal(explicit.kind, 'snapshot');
    assert.deepEqual(explicit.payload, { lines: [{ sku: 'a', qty: 2 }], note: null });
    assert.equal((explicit.occurred_at as Date).toISOString(), '2024-05-01T10:00:00.123Z');
    assert.equal(explicit.traceparent, traceparent);
    assert.equal(explicit.tenant_id, 'tenant-a');
    assert.ok(BigInt(String(explicit.position)) > BigInt(String(defaulted.position)));
  });

  it('accepts an ISO string for occurredAt', async () => {
    await inTransaction((client) =>
      appendToOutbox(client, orderEvent('o1', 1, { occurredAt: '2024-05-01T12:00:00+02:00' }), { schema }),
    );
    const [row] = await outboxRows();
    assert.equal((row!.occurred_at as Date).toISOString(), '2024-05-01T10:00:00.000Z');
  });

  const invalid: Array<[string, Partial<NewEvent> | Record<string, unknown>, string]> = [
    ['version 0', { aggregateVersion: 0 }, 'aggregateVersion'],
    ['a fractional version', { aggregateVersion: 1.5 }, 'aggregateVersion'],
    ['a missing eventType', { eventType: undefined }, 'eventType'],
    ['an unknown kind', { kind: 'delta' }, 'kind'],
    ['a missing payload', { payload: undefined }, 'payload'],
    ['a malformed traceparent', { traceparent: 'not-a-trace' }, 'traceparent'],
    ['an unparseable occurredAt', { occurredAt: 'yesterday' }, 'occurredAt'],
    ['an empty aggregateId', { aggregateId: '' }, 'aggregateId'],
  ];
  for (const [label, change, field] of invalid) {
    it(`rejects ${label} before sending anything to the database`, async () => {
      const sent: string[] = [];
      const spy: Executor = {
        async query() {
          sent.push('query');
          return { rows: [], rowCount: 0 };
        },
      };
      const event = { ...orderEvent('o1', 1), ...change } as NewEvent;
      await assert.rejects(
        appendToOutbox(spy, event, { schema }),
        (err: unknown) => err instanceof EnvelopeValidationError && err.field === field,
      );
      assert.deepEqual(sent, []);

      // On a real transaction the failure must not poison it: the caller can still decide what to do.
      await inTransaction(async (client) => {
        await assert.rejects(appendToOutbox(client, event, { schema }), EnvelopeValidationError);
        const { rows } = await client.query<{ ok: number }>('SELECT 1 AS ok');
        assert.equal(rows[0]!.ok, 1);
      });
      assert.deepEqual(await outboxRows(), []);
    });
  }

  it('rejects an invalid schema option before sending anything', async () => {
    const spy: Executor = {
      async query() {
        throw new Error('must not query');
      },
    };
    await assert.rejects(
      appendToOutbox(spy, orderEvent('o1', 1), { schema: 'x"; DROP TABLE y; --' }),
      InvalidIdentifierError,
    );
  });

  it('refuses a second event for the same aggregate version', async () => {
    await inTransaction((client) => appendToOutbox(client, orderEvent('o1', 1), { schema }));
    await assert.rejects(
      inTransaction((client) => appendToOutbox(client, orderEvent('o1', 1, { eventType: 'OrderChanged' }), { schema })),
      (err: unknown) => {
        const pgErr = err as { code?: string; constraint?: string };
        assert.equal(pgErr.code, '23505');
        assert.equal(pgErr.constraint, 'outbox_aggregate_type_aggregate_id_aggregate_version_key');
        return true;
      },
    );
    // Same version of a different aggregate is fine.
    await inTransaction((client) => appendToOutbox(client, orderEvent('o2', 1), { schema }));
    assert.equal((await outboxRows()).length, 2);
  });

  it('refuses a reused eventId', async () => {
    await inTransaction((client) => appendToOutbox(client, orderEvent('o1', 1, { eventId: 'same' }), { schema }));
    await assert.rejects(
      inTransaction((client) => appendToOutbox(client, orderEvent('o2', 1, { eventId: 'same' }), { schema })),
      (err: unknown) =>
        (err as { code?: string; constraint?: string }).code === '23505' &&
        (err as { constraint?: string }).constraint === 'outbox_event_id_key',
    );
  });
});

describe('updateExactlyOne', () => {
  const bump = `UPDATE "__schema__".orders SET status = $2, version = version + 1 WHERE id = $1 AND version = $3`;
  const sql = () => bump.replace('__schema__', schema);

  it('passes when exactly one row changes', async () => {
    await db.pool.query(`INSERT INTO ${orders} VALUES ('o1', 'placed', 1)`);
    await inTransaction(async (client) => {
      await updateExactlyOne(client, sql(), ['o1', 'paid', 1]);
      await appendToOutbox(client, orderEvent('o1', 2, { eventType: 'OrderPaid' }), { schema });
    });
    assert.deepEqual(await orderRows(), [{ id: 'o1', status: 'paid', version: 2 }]);
    assert.equal((await outboxRows()).length, 1);
  });

  it('throws ConcurrencyConflictError(0) on a lost race and the loser’s outbox row rolls back with it', async () => {
    await db.pool.query(`INSERT INTO ${orders} VALUES ('o1', 'placed', 1)`);
    const winner = await db.pool.connect();
    try {
      await winner.query('BEGIN');
      const { rows } = await winner.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const winnerPid = rows[0]!.pid;
      // Both read version 1; the winner's conditional update takes the row lock first.
      await updateExactlyOne(winner, sql(), ['o1', 'paid', 1]);

      const loser = withTransaction(db.pool, async (client) => {
        await appendToOutbox(
          client,
          {
            aggregateType: 'payment',
            aggregateId: 'p1',
            aggregateVersion: 1,
            eventType: 'PaymentRecorded',
            payload: { order: 'o1' },
          },
          { schema },
        );
        await updateExactlyOne(client, sql(), ['o1', 'cancelled', 1]);
        await appendToOutbox(client, orderEvent('o1', 2, { eventType: 'OrderCancelled' }), { schema });
      });
      const loserOutcome = loser.then(
        () => undefined,
        (err: unknown) => err,
      );
      await waitFor(async () => {
        const blocked = await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`,
          [winnerPid],
        );
        return blocked.rows[0]!.n === 1;
      }, 'the losing update to wait for the winner’s row lock');

      await appendToOutbox(winner, orderEvent('o1', 2, { eventType: 'OrderPaid', eventId: 'winner-event' }), {
        schema,
      });
      await winner.query('COMMIT');

      const err = await loserOutcome;
      assert.ok(err instanceof ConcurrencyConflictError, `expected ConcurrencyConflictError, got ${String(err)}`);
      assert.equal(err.rowCount, 0);
      assert.equal(err.code, 'CONVERGE_CONCURRENT_UPDATE');
    } finally {
      await winner.query('ROLLBACK').catch(() => undefined);
      winner.release();
    }
    assert.deepEqual(await orderRows(), [{ id: 'o1', status: 'paid', version: 2 }]);
    const rows = await outboxRows();
    assert.deepEqual(
      rows.map((row) => [row.event_id, row.aggregate_type, row.event_type]),
      [['winner-event', 'order', 'OrderPaid']],
    );
  });

  it('throws with the real count when a statement changes more than one row', async () => {
    await db.pool.query(`INSERT INTO ${orders} VALUES ('o1', 'placed', 1), ('o2', 'placed', 1)`);
    await assert.rejects(
      inTransaction((client) => updateExactlyOne(client, `UPDATE ${orders} SET status = 'paid' WHERE version = 1`)),
      (err: unknown) => err instanceof ConcurrencyConflictError && err.rowCount === 2,
    );
    assert.deepEqual(
      (await orderRows()).map((row) => row.status),
      ['placed', 'placed'],
    );
  });
});

describe('outbox table', () => {
  it('fills defaults for a plain SQL insert of only the required columns', async () => {
    await db.pool.query(
      `INSERT INTO ${outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
       VALUES ('sql-1', 'order', 'o9', 1, 'OrderImported', '{"source":"legacy"}')`,
    );
    const { rows } = await db.pool.query(
      `SELECT status, kind, schema_version, attempts, published_at, claimed_by, last_error,
              occurred_at <= now() AS occurred_ok, next_attempt_at <= now() AS due_now
         FROM ${outbox} WHERE event_id = 'sql-1'`,
    );
    assert.deepEqual(rows[0], {
      status: 'pending',
      kind: 'incremental',
      schema_version: 1,
      attempts: 0,
      published_at: null,
      claimed_by: null,
      last_error: null,
      occurred_ok: true,
      due_now: true,
    });
  });

  it('enforces the value checks for writers that bypass appendToOutbox', async () => {
    const insert = (column: string, value: string) =>
      db.pool.query(
        `INSERT INTO ${outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, ${column})
         VALUES ('chk-' || md5(random()::text), 'order', 'o1', 1, 'X', '{}', ${value})`,
      );
    for (const [column, value] of [
      ['kind', `'delta'`],
      ['status', `'done'`],
      ['schema_version', '0'],
    ] as const) {
      await assert.rejects(
        insert(column, value),
        (err: unknown) => (err as { code?: string }).code === '23514',
        column,
      );
    }
    await assert.rejects(
      db.pool.query(
        `INSERT INTO ${outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES ('v0', 'order', 'o1', 0, 'X', '{}')`,
      ),
      (err: unknown) => (err as { code?: string }).code === '23514',
    );
  });
});

describe('appendManyToOutbox', () => {
  it('inserts a batch in one statement on the caller’s transaction, in order, with its eventIds', async () => {
    const events = [orderEvent('b1', 1), orderEvent('b1', 2), orderEvent('b2', 1, { eventId: 'fixed-id' })];
    const appended = await inTransaction((client) => appendManyToOutbox(client, events, { schema: db.schema }));
    assert.equal(appended.length, 3);
    assert.equal(appended[2]!.eventId, 'fixed-id');
    const rows = await outboxRows();
    assert.deepEqual(
      rows.map((row) => [row.aggregate_id, Number(row.aggregate_version), row.event_id]),
      appended.map((a, i) => [events[i]!.aggregateId, events[i]!.aggregateVersion, a.eventId]),
    );
    const positions = appended.map((a) => BigInt(a.position));
    assert.ok(positions[0]! < positions[1]! && positions[1]! < positions[2]!, 'positions follow the given order');
  });

  it('rolls back with the transaction', async () => {
    await inTransaction(
      (client) => appendManyToOutbox(client, [orderEvent('r1', 1), orderEvent('r1', 2)], { schema: db.schema }),
      'ROLLBACK',
    );
    assert.equal((await outboxRows()).length, 0);
  });

  it('validates every event before sending anything: one bad event fails the whole call', async () => {
    const statements: string[] = [];
    const spy: Executor = { query: async (text: string) => (statements.push(text), { rows: [], rowCount: 0 }) };
    await assert.rejects(
      appendManyToOutbox(spy, [orderEvent('v1', 1), orderEvent('v1', 0)], { schema: db.schema }),
      (err: unknown) => err instanceof EnvelopeValidationError && err.field === 'aggregateVersion',
    );
    assert.deepEqual(statements, []);
  });

  it('returns nothing and sends nothing for an empty batch', async () => {
    const statements: string[] = [];
    const spy: Executor = { query: async (text: string) => (statements.push(text), { rows: [], rowCount: 0 }) };
    assert.deepEqual(await appendManyToOutbox(spy, [], { schema: db.schema }), []);
    assert.deepEqual(statements, []);
  });
});
