import { ServiceUnavailableError, PublishError } from '../runtime/errors.js';
import { brokerFailure } from './connection.js';
import type {
  ConnectRequest,
  MessageProperties,
  QueueSet,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportConnection,
  TransportDelivery,
  TransportPublisher,
} from './transport.js';

/**
 * A broker in memory, for one Node process: for development, demos and tests, NOT a broker.
 * Nothing is durable (a restart loses every message), nothing crosses the process, and there is
 * no flow control. What it does keep is the contract converge relies on (see transport.ts and
 * test/conformance/transport.ts): confirms only for routed messages, returns for unroutable
 * ones, FIFO per queue, prefetch, redelivery with `redelivered` after a nack or a closed
 * connection, per-message expiry dead-lettered into another queue (delayed retry), and a
 * delivery limit that dead-letters into `<queue>.dead` for quorum queue sets.
 *
 * Differences from RabbitMQ worth knowing: an expiry is honoured per message (RabbitMQ only at
 * the head of a queue), and a requeued message goes back to its original place in the queue.
 */
export function createInProcessTransport(): InProcessTransport {
  return new InProcessTransport();
}

interface Message {
  /** Arrival order in its queue; a requeued message goes back to its place. */
  seq: number;
  body: Buffer;
  exchange: string;
  routingKey: string;
  properties: MessageProperties;
  redelivered: boolean;
  /** Returns (nack with requeue, lost connection) so far. */
  returns: number;
  expiry?: NodeJS.Timeout;
}

interface Binding {
  queue: string;
  pattern: string;
}

/** An in-memory queue: ready messages in order, handed to its subscribers within their prefetch. */
class Queue {
  readonly ready: Message[] = [];
  readonly subscribers: InProcessSubscription[] = [];
  #next = 0;

  constructor(
    readonly name: string,
    /** Where expired, rejected or over-limit messages go; null drops them. */
    readonly deadLetterTo: string | null,
    /** Returns before a message is dead-lettered; null is no limit. */
    readonly deliveryLimit: number | null,
  ) {}

  nextSeq(): number {
    return this.#next++;
  }
}

export class InProcessTransport implements Transport {
  readonly kind = 'in-process';
  readonly #exchanges = new Map<string, Binding[]>();
  readonly #queues = new Map<string, Queue>();
  readonly #connections = new Set<InProcessConnection>();
  #closed = false;

  failure(err: unknown): Error {
    return err instanceof ServiceUnavailableError ? err : brokerFailure(err, { endpoint: 'in-process' });
  }

  connect(request: ConnectRequest): Promise<TransportConnection> {
    if (this.#closed || request.signal.aborted) return Promise.reject(new Error('in-process transport closed'));
    const connection = new InProcessConnection(this, request);
    this.#connections.add(connection);
    return Promise.resolve(connection);
  }

  /** Ends every connection (their unacked deliveries go back) and clears every expiry timer. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const connection of [...this.#connections]) await connection.close();
    for (const queue of this.#queues.values()) for (const message of queue.ready) clearTimeout(message.expiry);
    this.#queues.clear();
    this.#exchanges.clear();
  }

  /** Messages waiting in `queue` (not handed out), for tests and tools. */
  depth(queue: string): number {
    return this.#queues.get(queue)?.ready.length ?? 0;
  }

  forget(connection: InProcessConnection): void {
    this.#connections.delete(connection);
  }

  declareExchange(name: string): void {
    if (!this.#exchanges.has(name)) this.#exchanges.set(name, []);
  }

  declareQueue(name: string, deadLetterTo: string | null, deliveryLimit: number | null): void {
    if (!this.#queues.has(name)) this.#queues.set(name, new Queue(name, deadLetterTo, deliveryLimit));
  }

  bind(exchange: string, queue: string, pattern: string): void {
    const bindings = this.#exchanges.get(exchange);
    if (!bindings) throw new Error(`no exchange ${exchange}`);
    if (!bindings.some((b) => b.queue === queue && b.pattern === pattern)) bindings.push({ queue, pattern });
  }

  queue(name: string): Queue | undefined {
    return this.#queues.get(name);
  }

  /** The queues `routingKey` reaches through `exchange` ('' is the default exchange: the queue of that name). */
  route(exchange: string, routingKey: string): Queue[] | undefined {
    if (exchange === '') {
      const queue = this.#queues.get(routingKey);
      return queue ? [queue] : [];
    }
    const bindings = this.#exchanges.get(exchange);
    if (!bindings) return undefined;
    const names = new Set(bindings.filter((b) => topicMatches(b.pattern, routingKey)).map((b) => b.queue));
    return [...names].flatMap((name) => this.#queues.get(name) ?? []);
  }

  enqueue(queue: Queue, message: Omit<Message, 'seq'>): void {
    const entry: Message = { ...message, seq: queue.nextSeq() };
    const delay = entry.properties.expiration === undefined ? NaN : Number(entry.properties.expiration);
    if (Number.isFinite(delay)) {
      entry.expiry = setTimeout(() => this.#expire(queue, entry), Math.max(0, delay));
      entry.expiry.unref();
    }
    queue.ready.push(entry);
    this.dispatch(queue);
  }

  /** Back to its place in the queue, redelivered; over the delivery limit it is dead-lettered instead. */
  requeue(queue: Queue, message: Message): void {
    message.returns++;
    message.redelivered = true;
    if (queue.deliveryLimit !== null && message.returns > queue.deliveryLimit) {
      this.deadLetter(queue, message, 'delivery_limit');
      return;
    }
    const at = queue.ready.findIndex((m) => m.seq > message.seq);
    queue.ready.splice(at < 0 ? queue.ready.length : at, 0, message);
    this.dispatch(queue);
  }

  deadLetter(queue: Queue, message: Message, reason: 'expired' | 'rejected' | 'delivery_limit'): void {
    clearTimeout(message.expiry);
    const target = queue.deadLetterTo === null ? undefined : this.#queues.get(queue.deadLetterTo);
    if (!target) return;
    const { expiration: _expired, ...properties } = message.properties;
    const death = {
      queue: queue.name,
      reason,
      count: 1,
      exchange: message.exchange,
      'routing-keys': [message.routingKey],
    };
    const previous = properties.headers?.['x-death'];
    this.enqueue(target, {
      body: message.body,
      exchange: '',
      routingKey: target.name,
      redelivered: false,
      returns: 0,
      properties: {
        ...properties,
        headers: {
          ...properties.headers,
          'x-death': [death, ...(Array.isArray(previous) ? (previous as unknown[]) : [])],
          'x-first-death-reason': properties.headers?.['x-first-death-reason'] ?? reason,
          'x-first-death-queue': properties.headers?.['x-first-death-queue'] ?? queue.name,
          'x-last-death-reason': reason,
          'x-last-death-queue': queue.name,
        },
      },
    });
  }

  /** Hands ready messages to subscribers with room in their prefetch window, round robin. */
  dispatch(queue: Queue): void {
    while (queue.ready.length > 0) {
      const subscriber = queue.subscribers.find((s) => s.hasRoom);
      if (!subscriber) return;
      const message = queue.ready.shift()!;
      clearTimeout(message.expiry);
      message.expiry = undefined;
      // To the back of the line, so several subscribers share the queue.
      queue.subscribers.splice(queue.subscribers.indexOf(subscriber), 1);
      queue.subscribers.push(subscriber);
      subscriber.deliver(message);
    }
  }

  #expire(queue: Queue, message: Message): void {
    const at = queue.ready.indexOf(message);
    if (at < 0) return;
    queue.ready.splice(at, 1);
    this.deadLetter(queue, message, 'expired');
  }
}

class InProcessConnection implements TransportConnection {
  readonly #broker: InProcessTransport;
  readonly #request: ConnectRequest;
  readonly #publishers = new Set<InProcessPublisher>();
  readonly #subscriptions = new Set<InProcessSubscription>();
  readonly #onAbort = () => void this.close();
  #closed = false;

  constructor(broker: InProcessTransport, request: ConnectRequest) {
    this.#broker = broker;
    this.#request = request;
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

  /** Unacked deliveries go back to their queues, redelivered; publishes can no longer be made. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    this.#request.signal.removeEventListener('abort', this.#onAbort);
    for (const publisher of this.#publishers) void publisher.close();
    for (const subscription of this.#subscriptions) subscription.end();
    this.#broker.forget(this);
    this.#request.onClose();
    return Promise.resolve();
  }
}

class InProcessPublisher implements TransportPublisher {
  readonly #broker: InProcessTransport;
  #closed = false;

  constructor(broker: InProcessTransport) {
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

class InProcessSubscription implements Subscription {
  readonly #broker: InProcessTransport;
  readonly #queue: Queue;
  readonly #onDelivery: (delivery: TransportDelivery) => void;
  readonly #prefetch: number;
  readonly #unacked = new Map<number, Message>();
  #nextTag = 1;
  #active = true;

  constructor(
    broker: InProcessTransport,
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

/** AMQP topic matching: words split on '.', `*` is exactly one word, `#` zero or more. */
export function topicMatches(pattern: string, routingKey: string): boolean {
  return matchWords(pattern.split('.'), 0, routingKey.split('.'), 0);
}

function matchWords(pattern: string[], p: number, key: string[], k: number): boolean {
  if (p === pattern.length) return k === key.length;
  const word = pattern[p];
  if (word === '#') {
    for (let skip = k; skip <= key.length; skip++) if (matchWords(pattern, p + 1, key, skip)) return true;
    return false;
  }
  if (k === key.length) return false;
  return (word === '*' || word === key[k]) && matchWords(pattern, p + 1, key, k + 1);
}
