/**
 * The demo's tables, all in one schema of its own (dropped at the end): the service's `orders`
 * (the source of truth), and the two read models the consumers keep from the events.
 */
import type pg from 'pg';
import { defineEvents } from '../../src/index.js';

export const STATUSES = ['placed', 'paid', 'shipped', 'cancelled'] as const;
export type Status = (typeof STATUSES)[number];

/**
 * Incremental events of aggregate type `order` (statistics), and a full-state snapshot of the
 * order per change under aggregate type `order-card` (search): versions are unique per aggregate
 * stream in the outbox, so the snapshot stream is its own type with the same versions.
 */
export const orderEvents = defineEvents<{
  OrderPlaced: { status: Status; amount: number };
  OrderStatusChanged: { from: Status; to: Status; amount: number };
  OrderCard: { customer: string; status: Status; amount: number };
}>();

export const PROJECTIONS = { search: 'order_search', statistics: 'status_totals' } as const;

export function table(schema: string, name: string): string {
  return `"${schema.replaceAll('"', '""')}".${name}`;
}

export async function createTables(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`CREATE TABLE ${table(schema, 'orders')} (
    id text PRIMARY KEY, customer text NOT NULL, status text NOT NULL,
    amount integer NOT NULL, version bigint NOT NULL)`);
  // Search: one row per order, queried by status and customer.
  await pool.query(`CREATE TABLE ${table(schema, 'order_search')} (
    id text PRIMARY KEY, customer text NOT NULL, status text NOT NULL, amount integer NOT NULL)`);
  await pool.query(`CREATE INDEX ON ${table(schema, 'order_search')} (status, customer)`);
  // Statistics: orders and amount per status.
  await pool.query(`CREATE TABLE ${table(schema, 'status_totals')} (
    status text PRIMARY KEY, orders integer NOT NULL, amount bigint NOT NULL)`);
}
