/**
 * A consumer with a projection: keeps `order_totals` (one row per order) from the events of
 * service.ts. Every delivery runs in one transaction: inbox row, version check, read-model write,
 * commit, and only then the ack. Runs until SIGTERM or SIGINT.
 *
 * Environment: DATABASE_URL, AMQP_URL, EXAMPLE_SCHEMA (default `shop`),
 * EXAMPLE_EXCHANGE (default `converge.events`), EXAMPLE_QUEUE (default `order-totals`).
 */
import pg from 'pg';
import { createConverge, type EventEnvelope, type HandlerContext } from 'converge-events';
import { orderEvents } from './events.js';

const connectionString = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = process.env.EXAMPLE_SCHEMA ?? 'shop';
const totals = `${pg.escapeIdentifier(schema)}.order_totals`;

/**
 * Adds `delta` to the order's total, creating the row on the order's first event: an UPDATE alone
 * would change no row for a new order, and the delivery would fail with NoRowsWrittenError.
 */
async function addToTotal(event: EventEnvelope, { tx, applyIncrement }: HandlerContext, delta: number): Promise<void> {
  await applyIncrement({ projection: 'order_totals', event }, () =>
    tx.query(
      `INSERT INTO ${totals} (id, amount) VALUES ($1, $2)
       ON CONFLICT (id) DO UPDATE SET amount = order_totals.amount + EXCLUDED.amount`,
      [event.aggregateId, delta],
    ),
  );
}

// What the installation shares, once; the consumer inherits it. SIGTERM/SIGINT stop the consumer gracefully.
const converge = createConverge({
  connectionString,
  amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  schema,
  exchange: process.env.EXAMPLE_EXCHANGE ?? 'converge.events',
  events: orderEvents, // each handler's event.payload is typed by its key
});
// converge's tables (idempotent, safe from many processes at once; `converge migrate` does the same) and the read model.
await converge.migrate();
await converge.pool.query(`CREATE TABLE IF NOT EXISTS ${totals} (id text PRIMARY KEY, amount int NOT NULL)`);

const consumer = converge.startConsumer({
  queue: process.env.EXAMPLE_QUEUE ?? 'order-totals',
  bindings: ['order.#'],
  handleSignals: true,
  handlers: {
    OrderPlaced: (event, context) => addToTotal(event, context, event.payload.amount),
    AmountAdded: (event, context) => addToTotal(event, context, event.payload.delta),
  },
});

consumer.on('settled', (settlement) =>
  console.log(
    settlement.action === 'ack' ? `${settlement.outcome} ${settlement.eventId}` : `retry in ${settlement.delayMs} ms`,
  ),
);
await consumer.ready();
console.log('consumer ready');
