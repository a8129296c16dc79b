import { PublishError } from '../runtime/errors.js';
import type { InProcessBroker } from './in-process-broker.js';
import type { CarriedHeaders, MessageProperties, TransportPublisher } from './transport.js';

/** The publishing side of the in-process transport: a confirm for routed messages, a return for unroutable ones. */
export class InProcessPublisher implements TransportPublisher {
  readonly #broker: InProcessBroker;
  #closed = false;

  constructor(broker: InProcessBroker) {
    this.#broker = broker;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Routed now; the confirm (or the return) comes asynchronously, as from a broker. */
  async publish(
    exchange: string,
    routingKey: string,
    body: Buffer,
    properties: MessageProperties,
    _timeoutMs: number,
  ): Promise<void> {
    if (this.#closed) throw new PublishError('channel-closed');
    const queues = this.#broker.route(exchange, routingKey);
    await Promise.resolve();
    // As RabbitMQ: publishing to a missing exchange closes the channel (404).
    if (!queues) {
      this.#closed = true;
      throw new PublishError('channel-closed', `no exchange ${exchange}`);
    }
    if (queues.length === 0) throw new PublishError('returned', 'no queue bound for the routing key');
    for (const queue of queues)
      this.#broker.enqueue(queue, {
        // A copy per queue: nothing the publisher does afterwards reaches the queued message.
        body: Buffer.from(body),
        exchange,
        routingKey,
        properties: { ...properties, headers: { ...properties.headers } },
        redelivered: false,
        returns: 0,
      });
  }

  /** Nothing is encoded here: every header travels as given (a shallow copy, as publish makes). */
  carriedHeaders(headers: Record<string, unknown>): CarriedHeaders {
    return { headers: { ...headers }, omitted: [] };
  }

  holdTimeouts(): void {
    // No confirm is ever late here.
  }

  resumeTimeouts(): void {
    // See holdTimeouts.
  }

  close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }

  /** A publish here is settled without looking at `closed` again once sent, so closing fails nothing in flight. */
  retire(): Promise<void> {
    return this.close();
  }
}
