import type {
  ConnectRequest,
  QueueCounts,
  QueueHeadMessage,
  QueueSet,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportConnection,
  TransportDelivery,
  TransportPublisher,
} from './transport.js';

/** A Transport whose connections are views of one broker connection (shareConnection). */
export interface SharedConnectionTransport extends Transport {
  /** Broker connections opened so far: 1 while the first lives, one more after each loss. */
  readonly connectionsOpened: number;
  /** Views open now: one per relay or consumer session using the shared connection. */
  readonly openViews: number;
  /** Resolves once the connections the last view left are closed (after every owner stopped). */
  closed(): Promise<void>;
}

/**
 * One broker connection for many owners (the relays and consumers of several tenants in one
 * process). Each connect() is a view: its owner opens its own channels on the shared connection,
 * so every relay keeps a confirm channel of its own and confirms and returns are never crossed
 * between owners. Closing a view closes only what it opened; the last view out closes the
 * connection. When the connection ends, every view hears onClose and the next connect opens a
 * fresh one. The broker shows it as `name` (the owners' own names are not sent).
 */
export function shareConnection(transport: Transport, name: string): SharedConnectionTransport {
  return new SharedConnection(transport, name);
}

interface Underlying {
  opening: Promise<TransportConnection>;
  views: Set<ConnectionView>;
  blocked: { reason: string | undefined } | undefined;
  abort: AbortController;
  /** Ended by the broker or closed by its last view. */
  closed: boolean;
}

class SharedConnection implements SharedConnectionTransport {
  readonly kind: string;
  readonly #transport: Transport;
  readonly #name: string;
  #current: Underlying | undefined;
  #opened = 0;
  readonly #closing = new Set<Promise<void>>();

  constructor(transport: Transport, name: string) {
    this.kind = transport.kind;
    this.#transport = transport;
    this.#name = name;
  }

  get connectionsOpened(): number {
    return this.#opened;
  }

  get openViews(): number {
    return this.#current?.views.size ?? 0;
  }

  failure(err: unknown): Error {
    return this.#transport.failure(err);
  }

  async closed(): Promise<void> {
    await Promise.all(this.#closing);
  }

  async connect(request: ConnectRequest): Promise<TransportConnection> {
    if (request.signal.aborted) throw new Error('connect aborted');
    const underlying = (this.#current ??= this.#open());
    const view = new ConnectionView(request, () => this.#left(underlying, view));
    underlying.views.add(view);
    const aborted = new Promise<never>((_, reject) =>
      request.signal.addEventListener('abort', () => reject(new Error('connect aborted')), { once: true }),
    );
    aborted.catch(() => undefined);
    try {
      view.attach(await Promise.race([underlying.opening, aborted]));
    } catch (err) {
      this.#left(underlying, view);
      throw err;
    }
    const blocked = underlying.blocked;
    // After connect() returned: the owner only listens for the connection it was handed.
    if (blocked) setImmediate(() => view.blocked(blocked.reason));
    return view;
  }

  #open(): Underlying {
    const underlying: Underlying = {
      views: new Set(),
      blocked: undefined,
      abort: new AbortController(),
      closed: false,
      opening: Promise.resolve(undefined as never),
    };
    underlying.opening = this.#transport
      .connect({
        name: this.#name,
        signal: underlying.abort.signal,
        onClose: (err) => this.#lost(underlying, err),
        onBlocked: (reason) => {
          underlying.blocked = { reason };
          for (const view of underlying.views) view.blocked(reason);
        },
        onUnblocked: () => {
          underlying.blocked = undefined;
          for (const view of underlying.views) view.unblocked();
        },
      })
      .then(
        (connection) => {
          this.#opened++;
          return connection;
        },
        (err: unknown) => {
          if (this.#current === underlying) this.#current = undefined;
          throw err;
        },
      );
    underlying.opening.catch(() => undefined);
    return underlying;
  }

  /** The connection ended: every view with it, and the next connect opens a fresh one. */
  #lost(underlying: Underlying, err?: Error): void {
    if (this.#current === underlying) this.#current = undefined;
    underlying.closed = true;
    const views = [...underlying.views];
    underlying.views.clear();
    for (const view of views) view.lost(err);
  }

  /** The last view out closes the connection, so a stopped process leaves nothing open. */
  #left(underlying: Underlying, view: ConnectionView): void {
    underlying.views.delete(view);
    if (underlying.views.size > 0) return;
    if (this.#current === underlying) this.#current = undefined;
    if (underlying.closed) return;
    underlying.closed = true;
    const closing = underlying.opening.then(
      (connection) => connection.close().catch(() => undefined),
      () => undefined,
    );
    this.#closing.add(closing);
    void closing.finally(() => this.#closing.delete(closing));
  }
}

/** One owner's view: what it opened on the shared connection, and its own onClose. */
class ConnectionView implements TransportConnection {
  readonly #request: ConnectRequest;
  readonly #leave: () => void;
  readonly #publishers = new Set<TransportPublisher>();
  readonly #subscriptions = new Set<Subscription>();
  #connection: TransportConnection | undefined;
  #ended = false;
  #closing: Promise<void> | undefined;

  constructor(request: ConnectRequest, leave: () => void) {
    this.#request = request;
    this.#leave = leave;
  }

  attach(connection: TransportConnection): void {
    this.#connection = connection;
    this.#request.signal.addEventListener('abort', () => void this.close(), { once: true });
  }

  blocked(reason: string | undefined): void {
    if (!this.#ended) this.#request.onBlocked?.(reason);
  }

  unblocked(): void {
    if (!this.#ended) this.#request.onUnblocked?.();
  }

  /** The shared connection ended: what this view opened is gone with it. */
  lost(err?: Error): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#request.onClose(err);
  }

  #live(): TransportConnection {
    if (this.#ended || !this.#connection) throw new Error('connection closed');
    return this.#connection;
  }

  async openPublisher(options?: {
    declareExchange?: string;
    onConfirmTimeout?: () => void;
  }): Promise<TransportPublisher> {
    const publisher = await this.#live().openPublisher(options);
    if (this.#ended) {
      await publisher.close();
      throw new Error('connection closed');
    }
    this.#publishers.add(publisher);
    return publisher;
  }

  declareQueues(set: QueueSet): Promise<void> {
    return this.#live().declareQueues(set);
  }

  async subscribe(
    queue: string,
    onDelivery: (delivery: TransportDelivery) => void,
    options: SubscribeOptions,
  ): Promise<Subscription> {
    const subscription = await this.#live().subscribe(queue, onDelivery, options);
    this.#subscriptions.add(subscription);
    if (this.#ended) await endSubscription(subscription);
    return subscription;
  }

  inspectQueue(queue: string): Promise<QueueCounts | null> {
    return this.#live().inspectQueue(queue);
  }

  peekHead(queue: string): Promise<QueueHeadMessage | null> {
    return this.#live().peekHead(queue);
  }

  checkExchangeType(exchangeType: string, probeName: string): Promise<boolean> {
    return this.#live().checkExchangeType(exchangeType, probeName);
  }

  /**
   * Closes this view's channels, subscriptions first (their acks are ordered before the close, and
   * what they hold unacked goes back to its queue), and leaves the connection to the other views.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    const wasLive = !this.#ended;
    this.#ended = true;
    await Promise.all([...this.#subscriptions].map(endSubscription));
    await Promise.all([...this.#publishers].map((publisher) => publisher.close().catch(() => undefined)));
    this.#subscriptions.clear();
    this.#publishers.clear();
    this.#leave();
    if (wasLive) this.#request.onClose();
  }
}

/** A subscription's close when its transport has one, else its cancel (deliveries then stop). */
function endSubscription(subscription: Subscription): Promise<void> {
  return (subscription.close ? subscription.close() : subscription.cancel()).catch(() => undefined);
}
