/**
 * Partitioned consumers: scale a projection out over several processes without losing
 * per-aggregate order. The topic exchange feeds a consistent-hash exchange keyed on the aggregate
 * id, so all events of one order land in one partition queue; each partition queue is
 * single-active-consumer, so running this program twice leaves one active consumer per partition
 * and the other takes over when it stops. Needs the broker plugin
 * (`rabbitmq-plugins enable rabbitmq_consistent_hash_exchange`). Runs until SIGTERM or SIGINT.
 *
 * Environment: DATABASE_URL, AMQP_URL, EXAMPLE_SCHEMA (default `shop`),
 * EXAMPLE_EXCHANGE (default `converge.events`), EXAMPLE_QUEUE_PREFIX (default `order-totals`),
 * EXAMPLE_PARTITIONS (default 4).
 */
import amqp from 'amqplib';
import pg from 'pg';
import {
  applyIncrements,
  declarePartitionedTopology,
  migrate,
  startPartitionedConsumers,
  type EventOf,
} from 'converge-events';
import { orderEvents } from './events.js';

const connectionString = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const schema = process.env.EXAMPLE_SCHEMA ?? 'shop';
const exchange = process.env.EXAMPLE_EXCHANGE ?? 'converge.events';
const queuePrefix = process.env.EXAMPLE_QUEUE_PREFIX ?? 'order-totals';
const partitions = Number(process.env.EXAMPLE_PARTITIONS ?? 4);
const totals = `${pg.escapeIdentifier(schema)}.order_totals`;

// The topology, once per deployment (idempotent; `converge topology` does the same).
const connection = await amqp.connect(amqpUrl);
try {
  const channel = await connection.createChannel();
  await declarePartitionedTopology(channel, { exchange, queuePrefix, partitions, bindings: ['order.#'] });
} finally {
  await connection.close();
}

// converge's tables (idempotent, safe from many processes at once; `converge migrate` does the same) and the read model.
const setup = new pg.Pool({ connectionString, max: 1 });
await migrate(setup, { schema });
await setup.query(`CREATE TABLE IF NOT EXISTS ${totals} (id text PRIMARY KEY, amount int NOT NULL)`);
await setup.end();

/** The amount an event adds to its order's total. */
function amountOf(event: EventOf<typeof orderEvents>): number {
  return event.eventType === 'OrderPlaced' ? event.payload.amount : event.payload.delta;
}

// One consumer per partition, all sharing one inbox scope (the prefix).
const consumers = startPartitionedConsumers({
  connectionString,
  amqpUrl,
  schema,
  exchange,
  queuePrefix,
  partitions,
  handleSignals: true,
  events: orderEvents,
  // Set-based: one statement for all new events of a batch (in version order per aggregate).
  batchHandler: async (events, { tx }) => {
    // The first event of an order creates its row; later ones add to it. Rows of one order are
    // summed first, since one INSERT cannot touch the same row twice.
    await applyIncrements(tx, { projection: 'order_totals', events, schema }, (applicable) =>
      tx.query(
        `INSERT INTO ${totals} (id, amount)
         SELECT id, sum(amount) FROM unnest($1::text[], $2::int[]) AS e(id, amount) GROUP BY id
         ON CONFLICT (id) DO UPDATE SET amount = order_totals.amount + EXCLUDED.amount`,
        [applicable.map((e) => e.aggregateId), applicable.map(amountOf)],
      ),
    );
  },
});

await Promise.all(consumers.map((consumer) => consumer.ready()));
console.log(`${consumers.length} partition consumers ready`);
