/**
 * One contract every ORM adapter passes (test/integration/adapter-*.test.ts run it once each):
 *
 * - a rollback of the ORM transaction removes the business row and the outbox row together;
 * - a commit is published by the relay, and both rows carry the same xmin (one transaction);
 * - a consumer handler writing through the ORM's view of its `tx` writes in the consumer's own
 *   transaction and is applied once when the same event is delivered twice.
 *
 * Each test file only says how its ORM opens a transaction, inserts a row, and writes through
 * the view; the ORM's own pool is closed by `close()`.
 */
import assert from 'node:assert/strict';
import type { Executor } from '../../src/db/executor.js';
import {
  appendToOutbox,
  applyIncrement,
  silentLogger,
  startRelay,
  type EventEnvelope,
  type Relay,
  type WriteResult,
} from '../../src/index.js';
import { AdapterError } from '../../src/runtime/errors.js';
import { outboxRowToEnvelope, type OutboxEnvelopeRow } from '../../src/internal/index.js';
import { orderEvent } from './builders.js';
import { PROJECTION, collect, withEnv, type Env } from './consumer-env.js';
import {
  AMQP_URL,
  DATABASE_URL,
  after,
  before,
  createTestSchema,
  describe,
  it,
  waitFor,
  type TestDatabase,
} from './rig.js';

export interface ViewRow {
  eventId: string;
  aggregateId: string;
  amount: number;
}

export interface OrmUnderTest {
  /** One ORM transaction: `insertOrder` writes the business row through the ORM, `executor` is the adapter's Executor for it. Throwing rolls it back. */
  transaction(
    work: (tx: { insertOrder: (id: string, version: number) => Promise<void>; executor: Executor }) => Promise<void>,
  ): Promise<void>;
  /**
   * Writes one `order_rows` row through the ORM's view of converge's `tx`; returns the ORM's own
   * result, unconverted: applyIncrement must count it (docs/adapters.md).
   */
  writeThroughView(tx: Executor, row: ViewRow): Promise<WriteResult>;
  /** Runs a statement that fails (division by zero) through the ORM's view of converge's `tx`, no savepoint. */
  failThroughView(tx: Executor): Promise<unknown>;
  /**
   * What the ORM's own transaction() does when PostgreSQL answers its COMMIT with ROLLBACK (an
   * error inside was caught): converge does not run that COMMIT, so the ORM alone can tell.
   */
  commitAnsweredByRollback: 'rejects' | 'resolves';
  /** Calls the adapter's executorFrom… with the ORM's handle outside any transaction (it must throw). */
  executorOutsideTransaction(): unknown;
  close(): Promise<void>;
}

/** Opens the ORM on the test database, with `schema` holding `orders` and `order_rows`. */
export type OpenOrm = (target: { connectionString: string; schema: string }) => Promise<OrmUnderTest>;

/** The tables the contract's ORMs map: the business table and the read model the handler writes. */
async function createTables(db: TestDatabase): Promise<void> {
  const q = `"${db.schema}"`;
  await db.pool.query(`CREATE TABLE ${q}.orders (id text PRIMARY KEY, version integer NOT NULL)`);
  await db.pool.query(
    `CREATE TABLE ${q}.order_rows (event_id text PRIMARY KEY, aggregate_id text NOT NULL, amount integer NOT NULL)`,
  );
}

const placed = (id: string) => ({
  aggregateType: 'order',
  aggregateId: id,
  aggregateVersion: 1,
  eventType: 'AmountAdded',
  // Data that looks like placeholders travels as a value and arrives intact.
  payload: { delta: 5, note: "costs $1? it's 'fine'" },
});

async function count(db: { pool: TestDatabase['pool'] }, sql: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(sql);
  return Number(rows[0]!.n);
}

export function adapterContract(name: string, open: OpenOrm): void {
  describe(`${name} adapter`, () => {
    describe('on the producer side', () => {
      let db: TestDatabase;
      let orm: OrmUnderTest;

      before(async () => {
        db = await createTestSchema('cva');
        await createTables(db);
        orm = await open({ connectionString: DATABASE_URL, schema: db.schema });
      });

      after(async () => {
        await orm?.close();
        await db?.close();
      });

      it('a rollback of the ORM transaction removes the business row and the outbox row', async () => {
        const failure = new Error('business rule says no');
        await assert.rejects(
          orm.transaction(async ({ insertOrder, executor }) => {
            await insertOrder('o-rolled-back', 1);
            await appendToOutbox(executor, placed('o-rolled-back'), { schema: db.schema });
            const inside = await executor.query<{ n: string }>(
              `SELECT count(*) AS n FROM "${db.schema}".outbox WHERE aggregate_id = $1`,
              ['o-rolled-back'],
            );
            assert.equal(Number(inside.rows[0]!.n), 1, 'the outbox row is visible inside the transaction');
            throw failure;
          }),
          failure,
        );
        assert.equal(await count(db, `SELECT count(*) AS n FROM "${db.schema}".orders`), 0);
        assert.equal(await count(db, `SELECT count(*) AS n FROM "${db.schema}".outbox`), 0);
      });

      it('an SQL error caught inside the ORM transaction: nothing is written; the ORM rejects or resolves as declared', async () => {
        const run = orm.transaction(async ({ insertOrder, executor }) => {
          await insertOrder('o-caught', 1);
          await appendToOutbox(executor, placed('o-caught'), { schema: db.schema });
          try {
            await executor.query('SELECT 1 / 0');
          } catch {
            // swallowed on purpose: the transaction is aborted, its COMMIT answered by ROLLBACK
          }
        });
        if (orm.commitAnsweredByRollback === 'rejects') await assert.rejects(run);
        else await run;
        assert.equal(await count(db, `SELECT count(*) AS n FROM "${db.schema}".orders`), 0);
        assert.equal(await count(db, `SELECT count(*) AS n FROM "${db.schema}".outbox`), 0);
      });

      it('a handle outside a transaction is refused: the event would commit on its own', () => {
        assert.throws(
          () => orm.executorOutsideTransaction(),
          (err: unknown) => err instanceof AdapterError && err.code === 'CONVERGE_ADAPTER_MISUSE',
        );
      });
    });

    it('a commit is published by the relay; the consumer writes through the view in its own transaction', async () => {
      await withEnv(async (env) => {
        await createTables(env.db);
        const orm = await open({ connectionString: DATABASE_URL, schema: env.schema });
        let relay: Relay | undefined;
        try {
          const sameTransaction: boolean[] = [];
          const consumer = env.start({ handlers: { AmountAdded: viewHandler(env, orm, sameTransaction) } });
          await consumer.ready({ timeoutMs: 15_000 });
          await orm.transaction(async ({ insertOrder, executor }) => {
            await insertOrder('o-committed', 1);
            await appendToOutbox(executor, placed('o-committed'), { schema: env.schema });
          });
          // One xmin: the business row and the outbox row were written by the same transaction.
          assert.equal(
            await env.count(`SELECT count(*) AS n FROM $schema.orders o JOIN $schema.outbox x ON x.xmin = o.xmin`),
            1,
          );
          relay = startRelay({
            pool: env.pool,
            amqpUrl: AMQP_URL,
            exchange: env.exchange,
            schema: env.schema,
            logger: silentLogger,
            pollIntervalMs: 20,
          });
          await waitFor(
            async () => (await env.count(`SELECT count(*) AS n FROM $schema.outbox WHERE status = 'published'`)) === 1,
            'the relay to publish the committed event',
          );
          await waitFor(
            async () => (await env.count(`SELECT count(*) AS n FROM $schema.order_rows`)) === 1,
            'the consumer to apply the event',
          );
          assert.deepEqual(sameTransaction, [true]);
        } finally {
          await relay?.stop();
          await orm.close();
        }
      });
    });

    it('a handler that catches an SQL error from the view is never acked as applied: quarantined, nothing written', async () => {
      await withEnv(async (env) => {
        await createTables(env.db);
        const orm = await open({ connectionString: DATABASE_URL, schema: env.schema });
        try {
          const write = viewHandler(env, orm, []);
          const consumer = env.start({
            maxAttempts: 1,
            handlers: {
              AmountAdded: async (event, context) => {
                await write(event, context);
                try {
                  await orm.failThroughView(context.tx);
                } catch {
                  // swallowed on purpose
                }
              },
            },
          });
          const settled = collect(consumer);
          await consumer.ready({ timeoutMs: 15_000 });
          await env.publish(orderEvent('e-caught', 'o-caught', 1));
          await waitFor(() => settled.length === 1, 'the delivery to settle');
          assert.deepEqual(
            settled.map((s) =>
              s.action === 'ack' && s.outcome === 'quarantined' ? s.reason : s.action === 'ack' ? s.outcome : s.action,
            ),
            ['handler-failed'],
          );
          assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.order_rows`), 0);
          assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0);
        } finally {
          await orm.close();
        }
      });
    });

    it('a handler writing through the view is applied once when the event is delivered twice', async () => {
      await withEnv(async (env) => {
        await createTables(env.db);
        const orm = await open({ connectionString: DATABASE_URL, schema: env.schema });
        try {
          const consumer = env.start({ handlers: { AmountAdded: viewHandler(env, orm, []) } });
          const settled = collect(consumer);
          await consumer.ready({ timeoutMs: 15_000 });
          await orm.transaction(async ({ insertOrder, executor }) => {
            await insertOrder('o-twice', 1);
            await appendToOutbox(executor, placed('o-twice'), { schema: env.schema });
          });
          const { rows } = await env.pool.query<OutboxEnvelopeRow>(`SELECT * FROM "${env.schema}".outbox`);
          const event = outboxRowToEnvelope(rows[0]!);
          await env.publish(event);
          await env.publish(event);
          await waitFor(() => settled.length === 2, 'both deliveries to settle');
          assert.deepEqual(settled.map((s) => (s.action === 'ack' ? s.outcome : s.action)).sort(), [
            'applied',
            'duplicate',
          ]);
          const applied = await env.pool.query(`SELECT event_id, amount FROM "${env.schema}".order_rows`);
          assert.deepEqual(applied.rows, [{ event_id: event.eventId, amount: 5 }]);
        } finally {
          await orm.close();
        }
      });
    });
  });
}

/**
 * The projection handler: applyIncrement on the consumer's tx, the row written through the ORM's
 * view of that tx. It records whether the view's row belongs to the consumer's open transaction.
 */
function viewHandler(env: Env, orm: OrmUnderTest, sameTransaction: boolean[]) {
  return async (event: EventEnvelope, { tx }: { tx: Executor }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema: env.schema }, async () => {
      const written = await orm.writeThroughView(tx, {
        eventId: event.eventId,
        aggregateId: event.aggregateId,
        amount: (event.payload as { delta: number }).delta,
      });
      // Visible on tx but not yet to anyone else: written by the consumer's own, uncommitted transaction.
      const seen = `SELECT count(*) AS n FROM "${env.schema}".order_rows WHERE event_id = $1`;
      const onTx = await tx.query<{ n: string }>(seen, [event.eventId]);
      const elsewhere = await env.pool.query<{ n: string }>(seen, [event.eventId]);
      sameTransaction.push(Number(onTx.rows[0]!.n) === 1 && Number(elsewhere.rows[0]!.n) === 0);
      return written;
    });
  };
}
