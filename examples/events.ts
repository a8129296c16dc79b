/**
 * The order events these examples exchange: event types and their payload types, shared by the
 * service that writes them and the consumers that read them. A wrong event type or payload is a
 * compile error on both sides. Add runtime schemas (zod, valibot, ...) to check them at run time
 * too: see docs/typed-events.md.
 */
import { defineEvents } from 'converge-events';

export interface OrderEvents {
  OrderPlaced: { amount: number };
  AmountAdded: { delta: number };
}

export const orderEvents = defineEvents<OrderEvents>();
