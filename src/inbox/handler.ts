import type pg from 'pg';
import type { EventEnvelope } from '../envelope/envelope.js';
import type { EventOf, IsUntyped, PayloadsOf, UntypedEvents } from '../envelope/events.js';
import type { BoundProjection } from './bound-projection.js';

/**
 * What a handler gets besides the event. The gap/stale contract: write the projection with the
 * context's applyIncrement / applyIncrements / applySnapshot (or pass `tx` to the free ones,
 * which then default to the consumer's schema and refuse another). A version gap or stale version they reach on it is
 * reported to the consumer as well as thrown, and the consumer rolls the whole transaction
 * back (inbox row included) and parks, retries or quarantines the event exactly as if the
 * handler had let the error through. Catching it, or wrapping it in another error, cannot
 * make a gap count as applied. See docs/consumer.md.
 */
export interface HandlerContext extends BoundProjection {
  /**
   * The consumer's open transaction: write the projection (and next-hop outbox events) here, and pass it to the projection helpers.
   * It is an `Executor` (callbacks may be typed with that alone) and the node-postgres client itself, which the ORM views
   * (`kyselyFromExecutor(tx)`, `knexFromExecutor(tx, knex)`, ... in `converge-events/<orm>`) run on; never open or end a transaction on it.
   */
  tx: pg.PoolClient;
  /** The inbox scope (defaults to the queue name). */
  consumer: string;
  /**
   * Schema holding converge's tables. The context's own `applyIncrement`, `applyIncrements` and
   * `applySnapshot` are already bound to it and to `tx`; prefer them to the free functions.
   */
  schema: string;
  /** 1 on the first attempt; grows with every retry of this delivery. */
  attempt: number;
  redelivered: boolean;
}

/**
 * Runs inside the consumer transaction; throwing rolls back everything, inbox row included.
 * Declared as a method so that, where no event map types the payload, a handler annotated with
 * a narrower envelope (`EventEnvelope<{ delta: number }>`) is accepted as it is.
 */
export type EventHandler<E = EventEnvelope> = { handle(event: E, context: HandlerContext): Promise<unknown> }['handle'];

/**
 * Receives every new event of a batch at once (already deduplicated, and in version order
 * per aggregate), for set-based projection writes such as `applyIncrements`. Throwing rolls
 * the batch back; each delivery is then processed on its own, so one bad event never takes
 * the others down and keeps its own outcome. A method, like EventHandler, for the same reason.
 */
export type BatchHandler<E = EventEnvelope> = {
  handle(events: E[], context: HandlerContext): Promise<unknown>;
}['handle'];

/**
 * Handlers by eventType. With an event map or catalog `C` the keys are its event types (an
 * unknown key is a compile error), each handler's event is typed by its key, and `'*'` gets
 * the union; the parameters are checked strictly. Without one: any key, payload `unknown`.
 */
export type EventHandlers<C = UntypedEvents> =
  IsUntyped<PayloadsOf<C>> extends true
    ? Record<string, EventHandler>
    : {
        [K in keyof PayloadsOf<C> & string]?: (event: EventOf<C, K>, context: HandlerContext) => Promise<unknown>;
      } & { '*'?: (event: EventOf<C>, context: HandlerContext) => Promise<unknown> };

/** The batch handler for an event map or catalog `C`: its events are the union of C's envelopes. */
export type BatchHandlerOf<C = UntypedEvents> =
  IsUntyped<PayloadsOf<C>> extends true
    ? BatchHandler
    : (events: EventOf<C>[], context: HandlerContext) => Promise<unknown>;
