/**
 * The two read models, each kept by a consumer of its own (its own queue, inbox scope and
 * projection versions), so the live view shows "applied" per projection:
 *
 * - search (`order_search`): one row per order from the full-state `OrderCard` snapshots
 *   (applySnapshot: applied only if newer than what the projection has).
 * - statistics (`status_totals`): orders and amount per status from the incremental events
 *   (applyIncrement: exactly the previous version, else the delivery waits).
 */
import {
  applyIncrement,
  applySnapshot,
  startConsumer,
  type Consumer,
  type HandlerContext,
  type Transport,
} from '../../src/index.js';
import { PROJECTIONS, orderEvents, table, type Status } from './store.js';

export interface ConsumerBase {
  connectionString: string;
  /** RabbitMQ at amqpUrl, or the given transport (the in-process one, shared with the relay). */
  amqpUrl?: string;
  transport?: Transport;
  schema: string;
  exchange: string;
}

/** Adds `orders` and `amount` to one status row, creating the row with its first order. */
function addToStatus({ tx, schema }: HandlerContext, status: Status, orders: number, amount: number) {
  return tx.query(
    `INSERT INTO ${table(schema, 'status_totals')} AS t (status, orders, amount) VALUES ($1, $2, $3)
     ON CONFLICT (status) DO UPDATE SET orders = t.orders + EXCLUDED.orders, amount = t.amount + EXCLUDED.amount`,
    [status, orders, amount],
  );
}

export function startSearch(base: ConsumerBase, queue: string): Consumer<typeof orderEvents> {
  return startConsumer({
    ...base,
    queue,
    bindings: ['order-card.#'],
    events: orderEvents,
    handlers: {
      OrderCard: async (event, { tx, schema }) => {
        const { customer, status, amount } = event.payload;
        await applySnapshot(tx, { projection: PROJECTIONS.search, event, schema }, () =>
          tx.query(
            `INSERT INTO ${table(schema, 'order_search')} AS s (id, customer, status, amount) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET customer = EXCLUDED.customer, status = EXCLUDED.status, amount = EXCLUDED.amount`,
            [event.aggregateId, customer, status, amount],
          ),
        );
      },
    },
  });
}

export function startStatistics(base: ConsumerBase, queue: string): Consumer<typeof orderEvents> {
  return startConsumer({
    ...base,
    queue,
    bindings: ['order.#'],
    events: orderEvents,
    handlers: {
      OrderPlaced: async (event, context) => {
        const { status, amount } = event.payload;
        await applyIncrement(context.tx, { projection: PROJECTIONS.statistics, event, schema: context.schema }, () =>
          addToStatus(context, status, 1, amount),
        );
      },
      OrderStatusChanged: async (event, context) => {
        const { from, to, amount } = event.payload;
        await applyIncrement(
          context.tx,
          { projection: PROJECTIONS.statistics, event, schema: context.schema },
          async () => {
            // The order moves from one status row to the other: two rows changed.
            const left = await addToStatus(context, from, -1, -amount);
            const arrived = await addToStatus(context, to, 1, amount);
            return (left.rowCount ?? 0) + (arrived.rowCount ?? 0);
          },
        );
      },
    },
  });
}
