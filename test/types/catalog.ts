/**
 * The event catalogs the other type tests share: one type-only, one backed by Standard Schema
 * objects (zod here; valibot or arktype work the same way), whose payload types are inferred.
 */
import { z } from 'zod';
import { defineEvents } from 'converge-events';

export type OrderEvents = {
  OrderPlaced: { orderId: string; total: number };
  OrderPaid: { amount: number };
};

export const typeOnly = defineEvents<OrderEvents>();

export const orderEvents = defineEvents({
  OrderPlaced: z.object({ orderId: z.string(), total: z.number() }),
  // A default: producers may leave it out, handlers always see it.
  OrderPaid: z.object({ amount: z.number(), currency: z.string().default('EUR') }),
});
