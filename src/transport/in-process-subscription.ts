import type { InProcessBroker } from './in-process-broker.js';
import type { Message, Queue, QueueSubscriber } from './in-process-queue.js';
import type { Subscription, TransportDelivery } from './transport.js';

/** The consuming side of the in-process transport: deliveries within the prefetch window, and their ack/nack. */
export class InProcessSubscription implements Subscription, QueueSubscriber {
  readonly #broker: InProcessBroker;
  readonly #queue: Queue;
  readonly #onDelivery: (delivery: TransportDelivery) => void;
  readonly #prefetch: number;
  readonly #unacked = new Map<number, Message>();
  #nextTag = 1;
  #active = true;

  constructor(
    broker: InProcessBroker,
    queue: Queue,
    onDelivery: (delivery: TransportDelivery) => void,
    prefetch: number,
  ) {
    this.#broker = broker;
    this.#queue = queue;
    this.#onDelivery = onDelivery;
    this.#prefetch = prefetch;
  }

  get hasRoom(): boolean {
    return this.#active && this.#unacked.size < this.#prefetch;
  }

  deliver(message: Message): void {
    const tag = this.#nextTag++;
    this.#unacked.set(tag, message);
    const delivery: TransportDelivery = {
      content: message.body,
      fields: {
        exchange: message.exchange,
        routingKey: message.routingKey,
        redelivered: message.redelivered,
        deliveryTag: tag,
      },
      properties: message.properties,
      ack: () => this.#settle(tag, () => undefined),
      ackAllUpTo: () => {
        for (const earlier of [...this.#unacked.keys()]) if (earlier <= tag) this.#unacked.delete(earlier);
        this.#broker.dispatch(this.#queue);
      },
      nack: ({ requeue }) =>
        this.#settle(tag, (m) =>
          requeue ? this.#broker.requeue(this.#queue, m) : this.#broker.deadLetter(this.#queue, m, 'rejected'),
        ),
    };
    // Delivered asynchronously, in order: a handler that settles at once does not re-enter dispatch.
    queueMicrotask(() => this.#onDelivery(delivery));
  }

  cancel(): Promise<void> {
    this.#detach();
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.end();
    return Promise.resolve();
  }

  /** The connection ended: every unacked delivery goes back to the queue, redelivered. */
  end(): void {
    this.#detach();
    const returned = [...this.#unacked.values()];
    this.#unacked.clear();
    for (const message of returned) this.#broker.requeue(this.#queue, message);
  }

  #detach(): void {
    this.#active = false;
    const at = this.#queue.subscribers.indexOf(this);
    if (at >= 0) this.#queue.subscribers.splice(at, 1);
  }

  /** A second settle, or one after the connection ended, is a no-op (the message went back already). */
  #settle(tag: number, then: (message: Message) => void): void {
    const message = this.#unacked.get(tag);
    if (!message) return;
    this.#unacked.delete(tag);
    then(message);
    this.#broker.dispatch(this.#queue);
  }
}
