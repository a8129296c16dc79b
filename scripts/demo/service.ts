/**
 * The orders service: a small HTTP API on 127.0.0.1 (node:http). Each handler changes the order
 * and writes its events to the outbox in ONE transaction; a change is a conditional update on the
 * version just read (updateExactlyOne: 0 rows -> ConcurrencyConflictError -> 409, nothing written).
 *
 *   POST /orders               {"customer": "c-1", "amount": 30}  -> 201 {"id", "version"}
 *   POST /orders/<id>/status   {"status": "paid"}                 -> 200 {"id", "version"} | 404 | 409
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { appendManyToOutbox, updateExactlyOne, withTransaction, type Executor } from '../../src/index.js';
import { ConcurrencyConflictError } from '../../src/errors.js';
import { STATUSES, orderEvents, table, type Status } from './store.js';

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The next statuses an order may move to: placed -> paid -> shipped, and cancelled before shipping. */
const NEXT: Record<Status, Status[]> = {
  placed: ['paid', 'cancelled'],
  paid: ['shipped', 'cancelled'],
  shipped: [],
  cancelled: [],
};

interface Order {
  id: string;
  customer: string;
  status: Status;
  amount: number;
  version: number;
}

export class OrdersService {
  /** Changes committed (each wrote its events), for the live view. */
  written = 0;
  readonly #orders: string;

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
  ) {
    this.#orders = table(schema, 'orders');
  }

  async place(customer: string, amount: number): Promise<Order> {
    const order: Order = { id: randomUUID(), customer, status: 'placed', amount, version: 1 };
    await withTransaction(this.pool, async (tx) => {
      await tx.query(`INSERT INTO ${this.#orders} (id, customer, status, amount, version) VALUES ($1, $2, $3, $4, 1)`, [
        order.id,
        customer,
        order.status,
        amount,
      ]);
      await this.#record(tx, order, { eventType: 'OrderPlaced', payload: { status: order.status, amount } });
    });
    this.written++;
    return order;
  }

  async changeStatus(id: string, to: Status): Promise<Order> {
    const order = await withTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<Order>(
        `SELECT id, customer, status, amount, version::int AS version FROM ${this.#orders} WHERE id = $1`,
        [id],
      );
      const current = rows[0];
      if (!current) throw new HttpError(404, 'no such order');
      if (!NEXT[current.status].includes(to)) throw new HttpError(409, `${current.status} cannot become ${to}`);
      const next: Order = { ...current, status: to, version: current.version + 1 };
      // Conditional on the version read above: a concurrent change rolls back this one, events included.
      await updateExactlyOne(
        tx,
        `UPDATE ${this.#orders} SET status = $1, version = $2 WHERE id = $3 AND version = $4`,
        [to, next.version, id, current.version],
      );
      await this.#record(tx, next, {
        eventType: 'OrderStatusChanged',
        payload: { from: current.status, to, amount: current.amount },
      });
      return next;
    });
    this.written++;
    return order;
  }

  /** The incremental event for statistics and the full-state card for search, on the caller's transaction. */
  async #record(
    tx: Executor,
    order: Order,
    event:
      | { eventType: 'OrderPlaced'; payload: { status: Status; amount: number } }
      | { eventType: 'OrderStatusChanged'; payload: { from: Status; to: Status; amount: number } },
  ): Promise<void> {
    await appendManyToOutbox(
      tx,
      [
        { aggregateType: 'order', aggregateId: order.id, aggregateVersion: order.version, ...event },
        {
          aggregateType: 'order-card',
          aggregateId: order.id,
          aggregateVersion: order.version,
          kind: 'snapshot',
          eventType: 'OrderCard',
          payload: { customer: order.customer, status: order.status, amount: order.amount },
        },
      ],
      { schema: this.schema, events: orderEvents },
    );
  }
}

async function body(request: http.IncomingMessage): Promise<Record<string, unknown>> {
  let text = '';
  for await (const chunk of request) text += String(chunk);
  try {
    return JSON.parse(text || '{}') as Record<string, unknown>;
  } catch {
    throw new HttpError(400, 'body is not JSON');
  }
}

async function route(service: OrdersService, request: http.IncomingMessage): Promise<[number, unknown]> {
  const url = new URL(request.url ?? '/', 'http://localhost');
  if (request.method === 'POST' && url.pathname === '/orders') {
    const { customer, amount } = await body(request);
    if (typeof customer !== 'string' || !Number.isInteger(amount))
      throw new HttpError(400, 'customer, amount required');
    const order = await service.place(customer, amount as number);
    return [201, { id: order.id, version: order.version }];
  }
  const match = /^\/orders\/([^/]+)\/status$/.exec(url.pathname);
  if (request.method === 'POST' && match) {
    const { status } = await body(request);
    if (!STATUSES.includes(status as Status)) throw new HttpError(400, `status must be one of ${STATUSES.join(', ')}`);
    const order = await service.changeStatus(decodeURIComponent(match[1]!), status as Status);
    return [200, { id: order.id, version: order.version }];
  }
  throw new HttpError(404, 'not found');
}

/** Starts the API on a free port of 127.0.0.1; errors answer with a status and a short reason, never a payload. */
export async function serve(service: OrdersService): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    route(service, request).then(
      ([status, result]) =>
        response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(result)),
      (err: unknown) => {
        const status = err instanceof HttpError ? err.status : err instanceof ConcurrencyConflictError ? 409 : 500;
        const message = err instanceof HttpError ? err.message : (err as Error).name;
        response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: message }));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
