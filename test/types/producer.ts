/** appendToOutbox / appendManyToOutbox: eventType must be a key of the map, the payload its type. */
import { appendManyToOutbox, appendToOutbox, createConverge, type Executor, type NewEventOf } from 'converge-events';
import { orderEvents, typeOnly, type OrderEvents } from './catalog.js';

declare const tx: Executor;
const order = { aggregateType: 'order', aggregateId: 'o-1', aggregateVersion: 1 };

// Right payloads compile, with a runtime catalog, a type-only one, or an explicit type argument.
await appendToOutbox(
  tx,
  { ...order, eventType: 'OrderPlaced', payload: { orderId: 'o-1', total: 5 } },
  { events: orderEvents },
);
await appendToOutbox(
  tx,
  { ...order, eventType: 'OrderPaid', payload: { amount: 5 } },
  { events: orderEvents, schema: 'converge' },
);
await appendToOutbox(tx, { ...order, eventType: 'OrderPaid', payload: { amount: 5 } }, { events: typeOnly });
await appendToOutbox<OrderEvents>(tx, { ...order, eventType: 'OrderPaid', payload: { amount: 5 } });
// The producer writes the schema's input: a field with a default may be left out (or given).
await appendToOutbox(
  tx,
  { ...order, eventType: 'OrderPaid', payload: { amount: 5, currency: 'USD' } },
  { events: orderEvents },
);

// Without a map nothing changes: any eventType, any payload.
await appendToOutbox(tx, { ...order, eventType: 'AnythingAtAll', payload: { whatever: [1, 2] } });
await appendManyToOutbox(tx, [{ ...order, eventType: 'X', payload: 1 }]);

// A wrong payload at the producer.
await appendToOutbox(
  tx,
  // @ts-expect-error -- OrderPlaced needs a numeric total
  { ...order, eventType: 'OrderPlaced', payload: { orderId: 'o-1', total: '5' } },
  { events: orderEvents },
);
await appendToOutbox(
  tx,
  // @ts-expect-error -- OrderPaid's payload misses amount
  { ...order, eventType: 'OrderPaid', payload: {} },
  { events: typeOnly },
);
// @ts-expect-error -- the explicit type argument types the payload too
await appendToOutbox<OrderEvents>(tx, { ...order, eventType: 'OrderPaid', payload: { amount: 'five' } });

// A wrong event type.
await appendToOutbox(
  tx,
  // @ts-expect-error -- OrderShipped is not in the catalog
  { ...order, eventType: 'OrderShipped', payload: { amount: 5 } },
  { events: orderEvents },
);
// @ts-expect-error -- nor in the map
await appendToOutbox<OrderEvents>(tx, { ...order, eventType: 'OrderShipped', payload: { amount: 5 } });

// Many events at once: each checked against its own type.
await appendManyToOutbox(
  tx,
  [
    { ...order, eventType: 'OrderPlaced', payload: { orderId: 'o-1', total: 5 } },
    { ...order, aggregateVersion: 2, eventType: 'OrderPaid', payload: { amount: 5 } },
  ],
  { events: orderEvents },
);
await appendManyToOutbox(
  tx,
  [
    { ...order, eventType: 'OrderPlaced', payload: { orderId: 'o-1', total: 5 } },
    // @ts-expect-error -- the OrderPaid payload given to OrderPlaced
    { ...order, aggregateVersion: 2, eventType: 'OrderPlaced', payload: { amount: 5 } },
  ],
  { events: orderEvents },
);

// Events built elsewhere keep their checks.
const paid: NewEventOf<OrderEvents, 'OrderPaid'> = { ...order, eventType: 'OrderPaid', payload: { amount: 1 } };
await appendToOutbox(tx, paid, { events: typeOnly });
const wrong: NewEventOf<typeof orderEvents, 'OrderPlaced'> = {
  ...order,
  eventType: 'OrderPlaced',
  // @ts-expect-error -- a payload of the wrong type for the declared event
  payload: { amount: 1 },
};
void wrong;

// An event built apart, typed over the whole catalog (a union of its event types), is taken as it is.
declare const built: NewEventOf<typeof orderEvents>;
declare const builtFromMap: NewEventOf<OrderEvents>;
await appendToOutbox(tx, built, { events: orderEvents });
await appendToOutbox(tx, builtFromMap, { events: typeOnly });
await appendManyToOutbox(tx, [built, built], { events: orderEvents });
const produced: NewEventOf<typeof orderEvents>[] = [
  { ...order, eventType: 'OrderPlaced', payload: { orderId: 'o-1', total: 5 } },
  { ...order, eventType: 'OrderPaid', payload: { amount: 5 } },
];
await appendManyToOutbox(tx, produced, { events: orderEvents });
for (const event of produced) await appendToOutbox(tx, event, { events: orderEvents });

// The front door takes the same events, typed by its catalog.
const converge = createConverge({ connectionString: 'postgres://localhost/db', events: orderEvents });
await converge.append(tx, built);
await converge.appendMany(tx, produced);
await converge.append(tx, { ...order, eventType: 'OrderPaid', payload: { amount: 5 } });
// @ts-expect-error -- OrderShipped is not in the front door's catalog
await converge.append(tx, { ...order, eventType: 'OrderShipped', payload: { amount: 5 } });
