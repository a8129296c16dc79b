import type { InProcessBroker } from './in-process-broker.js';
import { InProcessPublisher } from './in-process-publisher.js';
import { InProcessSubscription } from './in-process-subscription.js';
import type {
  ConnectRequest,
  QueueCounts,
  QueueHeadMessage,
  QueueSet,
  SubscribeOptions,
  Subscription,
  TransportConnection,
  TransportDelivery,
  TransportPublisher,
} from './transport.js';

/** One connection to the in-process broker: its publishers and subscriptions end with it. */
export class InProcessConnection implements TransportConnection {
  readonly #broker: InProcessBroker;
  readonly #request: ConnectRequest;
  /** Tells the transport this connection is gone. */
  readonly #onClosed: (connection: InProcessConnection) => void;
  readonly #publishers = new Set<InProcessPublisher>();
  readonly #subscriptions = new Set<InProcessSubscription>();
  readonly #onAbort = () => void this.close();
  #closed = false;

  constructor(broker: InProcessBroker, request: ConnectRequest, onClosed: (connection: InProcessConnection) => void) {
    this.#broker = broker;
    this.#request = request;
    this.#onClosed = onClosed;
    request.signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  openPublisher(options: { declareExchange?: string } = {}): Promise<TransportPublisher> {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    if (options.declareExchange) this.#broker.declareExchange(options.declareExchange);
    const publisher = new InProcessPublisher(this.#broker);
    this.#publishers.add(publisher);
    return Promise.resolve(publisher);
  }

  declareQueues(set: QueueSet): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    const quorum = set.queueType === 'quorum';
    if (quorum && set.deadQueue) this.#broker.declareQueue(set.deadQueue, null, null);
    this.#broker.declareExchange(set.exchange);
    this.#broker.declareQueue(set.queue, quorum ? set.deadQueue : null, quorum ? set.deliveryLimit : null);
    for (const pattern of set.bindings) this.#broker.bind(set.exchange, set.queue, pattern);
    this.#broker.declareQueue(set.retryQueue, set.queue, quorum ? set.deliveryLimit : null);
    for (const tier of set.retryTiers ?? [])
      this.#broker.declareQueue(tier.queue, set.queue, quorum ? set.deliveryLimit : null, tier.delayMs);
    return Promise.resolve();
  }

  subscribe(
    queueName: string,
    onDelivery: (delivery: TransportDelivery) => void,
    options: SubscribeOptions,
  ): Promise<Subscription> {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    const queue = this.#broker.queue(queueName);
    // As RabbitMQ: consuming from a queue that does not exist is refused (404).
    if (!queue) return Promise.reject(new Error(`NOT_FOUND - no queue '${queueName}'`));
    const subscription = new InProcessSubscription(this.#broker, queue, onDelivery, options.prefetch);
    this.#subscriptions.add(subscription);
    queue.subscribers.push(subscription);
    // Deliveries start after subscribe() returned, as they would over a socket.
    queueMicrotask(() => this.#broker.dispatch(queue));
    return Promise.resolve(subscription);
  }

  inspectQueue(queueName: string): Promise<QueueCounts | null> {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    const queue = this.#broker.queue(queueName);
    return Promise.resolve(queue ? { messages: queue.ready.length, consumers: queue.subscribers.length } : null);
  }

  /** The head stays where it is, unflagged: unlike RabbitMQ's get and requeue, a look here is no return. */
  peekHead(queueName: string): Promise<QueueHeadMessage | null> {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    const head = this.#broker.queue(queueName)?.ready[0];
    return Promise.resolve(
      head ? { properties: { ...head.properties, headers: { ...head.properties.headers } } } : null,
    );
  }

  /** Only topic exchanges exist here. */
  checkExchangeType(exchangeType: string): Promise<boolean> {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    return Promise.resolve(exchangeType === 'topic');
  }

  /** Unacked deliveries go back to their queues, redelivered; publishes can no longer be made. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    this.#request.signal.removeEventListener('abort', this.#onAbort);
    for (const publisher of this.#publishers) void publisher.close();
    for (const subscription of this.#subscriptions) subscription.end();
    this.#onClosed(this);
    this.#request.onClose();
    return Promise.resolve();
  }
}
