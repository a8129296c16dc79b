/**
 * applyIncrement / applyIncrements / applySnapshot: the write callback sees the typed event(s)
 * and must report what it wrote (a query result, a row count or 'unchanged'); a callback that
 * returns nothing does not compile.
 */
import {
  applyIncrement,
  applyIncrements,
  applySnapshot,
  startConsumer,
  type EventOf,
  type Executor,
  type WriteResult,
} from 'converge-events';
import { orderEvents, type OrderEvents } from './catalog.js';
import { expectType, type Equal } from './expect.js';

declare const tx: Executor;
declare const placed: EventOf<OrderEvents, 'OrderPlaced'>;
const sql =
  'INSERT INTO order_search (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = EXCLUDED.total';

// The callback gets the event back, typed; a query result, a count or 'unchanged' are reports.
await applyIncrement(tx, { projection: 'order_search', event: placed }, async (event) => {
  expectType<Equal<typeof event, EventOf<OrderEvents, 'OrderPlaced'>>>(true);
  return tx.query(sql, [event.aggregateId, event.payload.total]);
});
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => 1);
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => 'unchanged');
await applyIncrement(tx, { projection: 'order_search', event: placed }, () => tx.query(sql, []));

// @ts-expect-error -- returns nothing: an UPDATE that found no row would pass for a write
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => {
  await tx.query('UPDATE order_search SET total = total + $2 WHERE id = $1', [placed.aggregateId, 1]);
});
// @ts-expect-error -- a typo of 'unchanged' is not a report
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => 'unchanged!');
await applyIncrement(tx, { projection: 'order_search', event: placed }, async (event) => {
  // @ts-expect-error -- OrderPlaced has no amount
  return tx.query(sql, [event.payload.amount]);
});

// Snapshots report the same way.
await applySnapshot(tx, { projection: 'order_search', event: placed, deleted: false }, async (event) =>
  tx.query(sql, [event.aggregateId, event.payload.total]),
);
// @ts-expect-error -- returns nothing
await applySnapshot(tx, { projection: 'order_search', event: placed }, async () => undefined);

// Batches: the callback gets the typed events it must write.
startConsumer({
  queue: 'orders',
  amqpUrl: 'amqp://localhost',
  connectionString: 'postgres://localhost/db',
  events: orderEvents,
  batchHandler: async (events, { tx }) => {
    await applyIncrements(tx, { projection: 'order_search', events }, async (applied) => {
      expectType<Equal<(typeof applied)[number], EventOf<typeof orderEvents>>>(true);
      const totals = applied.map((e) => (e.eventType === 'OrderPlaced' ? e.payload.total : e.payload.amount));
      return tx.query(sql, [applied.map((e) => e.aggregateId), totals]);
    });
    await applyIncrements(tx, { projection: 'order_search', events, expectRows: 'at-least-one' }, async () => 1);
    // @ts-expect-error -- returns nothing
    await applyIncrements(tx, { projection: 'order_search', events }, async () => {});
    // @ts-expect-error -- not one of the expectations
    await applyIncrements(tx, { projection: 'order_search', events, expectRows: 'none' }, async () => 1);
  },
});

// The report type, for helpers that write on a projection's behalf.
const write = async (): Promise<WriteResult> => tx.query(sql, []);
await applyIncrement(tx, { projection: 'order_search', event: placed }, write);

// Each ORM's own result is a report as it comes, no conversion (docs/adapters.md).
declare const kyselyInsert: import('kysely').InsertResult;
declare const kyselyUpdate: import('kysely').UpdateResult;
declare const typeOrmUpdate: import('typeorm').UpdateResult;
declare const typeOrmInsert: import('typeorm').InsertResult;
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => kyselyInsert);
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => [kyselyInsert]);
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => kyselyUpdate);
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => typeOrmUpdate);
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => typeOrmInsert);
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => 1n);
// An entity (what TypeORM's save() returns) carries no count.
// @ts-expect-error -- not a report of rows written
await applyIncrement(tx, { projection: 'order_search', event: placed }, async () => ({ id: 'o-1', total: 5 }));
