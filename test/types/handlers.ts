/**
 * Handler registration: payloads inferred per key from the catalog, unknown keys rejected, the
 * '*' and batch handlers get the union, schema evolution keyed by the map; without a map any
 * key works and a handler annotated with a narrower envelope is accepted as it is.
 */
import {
  Consumer,
  startConsumer,
  startPartitionedConsumers,
  type BatchHandler,
  type EventEnvelope,
  type EventHandler,
  type EventHandlers,
  type EventOf,
  type HandlerContext,
} from 'converge-events';
import { DeliveryProcessor } from 'converge-events/internal';
import { orderEvents, typeOnly, type OrderEvents } from './catalog.js';
import { expectType, type Equal } from './expect.js';

const base = { queue: 'orders', amqpUrl: 'amqp://localhost', connectionString: 'postgres://localhost/db' };

// Payloads inferred from the catalog's schemas: the schema's output (the default filled in).
startConsumer({
  ...base,
  events: orderEvents,
  handlers: {
    OrderPlaced: async (event, { tx }) => {
      expectType<Equal<typeof event.payload, { orderId: string; total: number }>>(true);
      expectType<Equal<typeof event.eventType, 'OrderPlaced'>>(true);
      await tx.query('SELECT $1::numeric', [event.payload.total]);
    },
    // A handler may return whatever it awaited last.
    OrderPaid: async (event) => event.payload.currency.toUpperCase(),
  },
});

// The same with a type-only catalog, and with the map given as a type argument.
startConsumer({
  ...base,
  events: typeOnly,
  handlers: {
    OrderPaid: async ({ payload }) => {
      expectType<Equal<typeof payload, { amount: number }>>(true);
      void payload;
    },
  },
});
startConsumer<OrderEvents>({
  ...base,
  handlers: {
    OrderPlaced: async ({ payload }) => {
      expectType<Equal<typeof payload.orderId, string>>(true);
      void payload;
    },
  },
});
new Consumer({ ...base, events: orderEvents, handlers: { OrderPaid: async (event) => void event.payload.amount } });
startPartitionedConsumers({
  ...base,
  queuePrefix: 'orders',
  partitions: 4,
  events: orderEvents,
  handlers: { OrderPaid: async (event) => void event.payload.amount },
});
new DeliveryProcessor({
  consumer: 'c',
  connectionString: base.connectionString,
  events: orderEvents,
  handlers: { OrderPaid: async (event) => void event.payload.amount },
});

startConsumer({
  ...base,
  events: orderEvents,
  handlers: {
    OrderPlaced: async (event) => {
      // @ts-expect-error -- no such field in OrderPlaced's payload
      void event.payload.amount;
    },
  },
});

startConsumer({
  ...base,
  events: orderEvents,
  handlers: {
    // @ts-expect-error -- OrderShipped is not an event type of the catalog
    OrderShipped: async () => undefined,
  },
});

startConsumer({
  ...base,
  events: orderEvents,
  handlers: {
    // @ts-expect-error -- an annotation that contradicts the catalog
    OrderPaid: async (event: EventEnvelope<{ cents: number }>) => void event,
  },
});

// '*' gets the union of the catalog's envelopes; eventType narrows it.
startConsumer({
  ...base,
  events: orderEvents,
  handlers: {
    '*': async (event) => {
      if (event.eventType === 'OrderPlaced') expectType<Equal<typeof event.payload.total, number>>(true);
      else expectType<Equal<typeof event.payload.currency, string>>(true);
    },
  },
});

// The batch handler gets the union too.
startConsumer({
  ...base,
  events: orderEvents,
  batchHandler: async (events) => {
    expectType<Equal<(typeof events)[number], EventOf<typeof orderEvents>>>(true);
    for (const event of events) if (event.eventType === 'OrderPaid') void event.payload.amount;
  },
});
startConsumer({
  ...base,
  events: orderEvents,
  // @ts-expect-error -- a batch handler written for other events
  batchHandler: async (events: EventEnvelope<{ cents: number }>[]) => void events,
});

// Schema evolution is keyed by the catalog; an upcaster may annotate the old shape it reads.
startConsumer({
  ...base,
  events: orderEvents,
  handlers: { OrderPaid: async () => undefined },
  schemas: { OrderPaid: { current: 2, upcasters: { 1: (old: { cents: number }) => ({ amount: old.cents / 100 }) } } },
});
startConsumer({
  ...base,
  events: orderEvents,
  handlers: { OrderPaid: async () => undefined },
  // @ts-expect-error -- OrderRefunded is not an event type of the catalog
  schemas: { OrderRefunded: { current: 2 } },
});

// Handlers written apart from the consumer keep their types.
const handlers: EventHandlers<typeof orderEvents> = {
  OrderPlaced: async (event) => void event.payload.orderId,
};
startConsumer({ ...base, events: orderEvents, handlers });
const onPaid = async (event: EventOf<OrderEvents, 'OrderPaid'>, { tx }: HandlerContext) => {
  await tx.query('SELECT $1::numeric', [event.payload.amount]);
};
startConsumer<OrderEvents>({ ...base, handlers: { OrderPaid: onPaid } });

// ---- Without a map: any key, payload unknown, and narrower annotations are accepted. ----

startConsumer({
  ...base,
  handlers: {
    AmountAdded: async (event) => {
      expectType<Equal<typeof event.payload, unknown>>(true);
      expectType<Equal<typeof event.eventType, string>>(true);
      // @ts-expect-error -- unknown until narrowed: this is what the event map is for
      void event.payload.delta;
    },
    '*': async () => undefined,
  },
});

// The README's old samples, annotated instead of cast: accepted with no map.
startConsumer({
  ...base,
  handlers: {
    AmountAdded: async (event: EventEnvelope<{ delta: number }>, { tx }) => {
      await tx.query('SELECT $1::int', [event.payload.delta]);
    },
  },
  batchHandler: async (events: EventEnvelope<{ delta: number }>[]) => void events[0]?.payload.delta,
  schemas: { OrderPaid: { current: 2, upcasters: { 1: (p: { amount: number }) => ({ ...p, currency: 'EUR' }) } } },
});
const narrow: EventHandler = async (event: EventEnvelope<{ delta: number }>) => void event.payload.delta;
const narrowBatch: BatchHandler = async (events: EventEnvelope<{ delta: number }>[]) => void events;
const untyped: Record<string, EventHandler> = { AmountAdded: narrow };
startConsumer({ ...base, handlers: untyped, batchHandler: narrowBatch });
