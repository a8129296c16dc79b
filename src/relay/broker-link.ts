import { transportFor } from '../transport/rabbitmq.js';
import { withinDeadline } from '../transport/socket-control.js';
import type { ConnectRequest, Transport, TransportConnection, TransportPublisher } from '../transport/transport.js';
import { BlockState } from './blocked.js';
import type { ResolvedRelayOptions } from './options.js';

/** What opening a link reads of a relay's options: the publisherShape fields both relays share. */
export type LinkOptions = Pick<
  ResolvedRelayOptions,
  | 'transport'
  | 'amqpUrl'
  | 'amqpSocketOptions'
  | 'logger'
  | 'relayId'
  | 'exchange'
  | 'declareExchange'
  | 'confirmTimeoutMs'
>;

/** What the link tells the relay about the broker blocking and unblocking its connection. */
export interface BlockListener {
  blocked(reason: string | undefined): void;
  unblocked(): void;
}

/**
 * The relay's one connection and confirm channel to the broker, through a Transport (RabbitMQ
 * unless the options name another, e.g. the in-process one). Apart from the relay's claim →
 * publish → mark cycle so that the cycle only asks for a channel and drops it on failure; how
 * the channel is opened, shared and closed lives here, and so does the broker's verdict on
 * whether the connection is blocked (a resource alarm).
 */
export class BrokerLink {
  readonly #options: LinkOptions;
  readonly #transport: Transport;
  readonly #blocks = new BlockState();
  readonly #blockListener: BlockListener;
  #connection: TransportConnection | undefined;
  /** Aborts the connect request behind #connection: the attempt while it is opened, the connection once open. */
  #connectAbort: AbortController | undefined;
  #publisher: TransportPublisher | undefined;
  #opening: Promise<TransportPublisher> | undefined;
  /** interrupt() was called: no new connection is opened. */
  #closed = false;
  readonly #closing = new Set<Promise<void>>();

  constructor(options: LinkOptions, blockListener: BlockListener) {
    this.#options = options;
    this.#transport = transportFor(options);
    this.#blockListener = blockListener;
  }

  /** A confirm channel is open (it may still close before its next publish). */
  get open(): boolean {
    return this.#publisher !== undefined && !this.#publisher.closed;
  }

  /** The broker blocks the connection (a resource alarm): publishes wait until it unblocks. */
  get blocked(): boolean {
    return this.#blocks.blocked;
  }

  get blockedReason(): string | undefined {
    return this.#blocks.reason;
  }

  /** A publish written at `sentAt` (performance.now()) waited, at least partly, on a blocked connection. */
  blockedSince(sentAt: number): boolean {
    return this.#blocks.overlaps(sentAt);
  }

  /** The shared confirm channel; a failure to open it is thrown typed, naming RabbitMQ and host:port. */
  publisher(): Promise<TransportPublisher> {
    return this.#ensurePublisher().catch((err: unknown) => {
      throw this.#transport.failure(err);
    });
  }

  #ensurePublisher(): Promise<TransportPublisher> {
    if (this.#publisher && !this.#publisher.closed) return Promise.resolve(this.#publisher);
    // Concurrent cycles share one channel; whoever comes first opens it for all.
    this.#opening ??= this.#openPublisher().finally(() => (this.#opening = undefined));
    return this.#opening;
  }

  async #openPublisher(): Promise<TransportPublisher> {
    const options = this.#options;
    if (this.#closed) throw new Error('the relay is stopping');
    if (!this.#connection) {
      const connectAbort = new AbortController();
      this.#connectAbort = connectAbort;
      let opened: TransportConnection | undefined;
      try {
        opened = await this.#transport.connect({
          name: `converge-relay ${options.relayId}`,
          signal: connectAbort.signal,
          onClose: () => this.#connectionClosed(opened),
          onBlocked: (reason) => this.#blocked(opened, reason),
          onUnblocked: () => {
            if (opened !== undefined && this.#connection === opened) this.#unblock();
          },
        });
      } finally {
        if (!opened && this.#connectAbort === connectAbort) this.#connectAbort = undefined;
      }
      this.#connection = opened;
    }
    const connection = this.#connection;
    const publisher = await openConfirmChannel(connection, options, {
      onConfirmTimeout: (opened) => void this.discard(opened),
      onStall: () => void this.discard(),
    });
    if (this.#connection !== connection) {
      // Dropped (or stopped) while the channel was being opened.
      await publisher.close();
      throw new Error('connection dropped while opening a channel');
    }
    if (this.#blocks.blocked) publisher.holdTimeouts();
    this.#publisher = publisher;
    return publisher;
  }

  #connectionClosed(connection: TransportConnection | undefined): void {
    if (connection === undefined || this.#connection !== connection) return;
    this.#connection = undefined;
    this.#connectAbort = undefined;
    // A new connection is not blocked until the broker says so again.
    this.#unblock();
  }

  #blocked(connection: TransportConnection | undefined, reason: string | undefined): void {
    if (connection === undefined || this.#connection !== connection) return;
    // No confirm can come while the broker reads nothing from us: waiting is not failing.
    this.#publisher?.holdTimeouts();
    if (this.#blocks.block(reason, performance.now())) this.#blockListener.blocked(reason);
  }

  #unblock(): void {
    this.#publisher?.resumeTimeouts();
    if (this.#blocks.unblock(performance.now())) this.#blockListener.unblocked();
  }

  /**
   * Drops the channel and its connection, if `publisher` is (still) the current one, or whatever
   * is current without it. The next publisher() opens fresh ones. Other batches may already use
   * a newer channel; an old failure must not close it.
   */
  discard(publisher?: TransportPublisher): Promise<void> {
    if (publisher && publisher !== this.#publisher) return Promise.resolve();
    const connection = this.#connection;
    const current = this.#publisher;
    this.#publisher = undefined;
    if (connection) {
      this.#connection = undefined;
      this.#connectAbort = undefined;
      this.#unblock();
    }
    // Closing the connection closes its channels; a broker that does not answer gets its socket destroyed.
    const closing = connection ? connection.close() : (current?.close() ?? Promise.resolve());
    this.#closing.add(closing);
    return closing.finally(() => this.#closing.delete(closing));
  }

  /**
   * The channel to send a claimed batch on: `taken` (fetched before the claim) unless it was retired
   * or dropped meanwhile; then the current one, or `taken` after all if none opens (its publishes
   * fail as channel-closed and are retried, rather than the claimed rows waiting out their lease).
   */
  async latest(taken: TransportPublisher): Promise<TransportPublisher> {
    if (taken === this.#publisher && !taken.closed) return taken;
    return this.#ensurePublisher().catch(() => taken);
  }

  /**
   * Retires the channel, if `publisher` is still the current one, and keeps the connection: the next
   * publisher() opens a fresh channel on it, and the old one closes once the batches still in flight
   * on it have their confirms. For a channel whose every publish the broker nacked.
   */
  renewChannel(publisher: TransportPublisher): void {
    if (publisher !== this.#publisher) return;
    this.#publisher = undefined;
    this.#options.logger.info(
      { relayId: this.#options.relayId },
      'the broker nacked a whole batch: publishing on a new channel',
    );
    const closing = publisher.retire();
    this.#closing.add(closing);
    void closing.finally(() => this.#closing.delete(closing));
  }

  /**
   * For stop(): no new connection from now on, and one being opened fails at once. Publishes
   * waiting on a blocked connection would wait for as long as the alarm lasts: they fail now.
   */
  interrupt(): void {
    this.#closed = true;
    if (this.#opening) this.#connectAbort?.abort();
    if (this.#blocks.blocked) void this.discard();
  }

  /** Closes everything it opened; the broker gets a grace period to answer, then the socket is destroyed. */
  async close(): Promise<void> {
    this.interrupt();
    await this.#opening?.catch(() => undefined);
    await this.discard();
    await Promise.all(this.#closing);
  }
}

/**
 * A confirm channel on `connection`. A broker that stalls right after the handshake must not keep
 * a relay waiting on a channel: past confirmTimeoutMs `onStall` runs and the open fails.
 * `onConfirmTimeout` gets the channel at its first lost confirm, to drop it before another publish.
 */
async function openConfirmChannel(
  connection: TransportConnection,
  options: LinkOptions,
  handlers: { onConfirmTimeout?: (publisher: TransportPublisher) => void; onStall?: () => void },
): Promise<TransportPublisher> {
  const { onConfirmTimeout, onStall } = handlers;
  const opening = (async () => {
    const publisher: TransportPublisher = await connection.openPublisher({
      ...(options.declareExchange ? { declareExchange: options.exchange } : {}),
      ...(onConfirmTimeout ? { onConfirmTimeout: () => onConfirmTimeout(publisher) } : {}),
    });
    return publisher;
  })();
  return withinDeadline(opening, options.confirmTimeoutMs, () => {
    onStall?.();
    return new Error(`no confirm channel within ${options.confirmTimeoutMs} ms`);
  });
}

/**
 * The CDC relay's link: one connection and confirm channel per stream session. A session that
 * stops (a return, nack, lost confirm, or stop()) closes both before the next one starts, so
 * publishes of the next session never interleave with late ones of the last: the retried event
 * is the first one sent. A lost confirm fails its publish and so ends the session, which closes
 * the channel: unlike BrokerLink, nothing is dropped behind the session's back.
 */
export class SessionLink {
  readonly #options: LinkOptions;
  readonly #transport: Transport;

  constructor(options: LinkOptions) {
    this.#options = options;
    this.#transport = transportFor(options);
  }

  /** Opens a session's channel; a failure is thrown typed, naming RabbitMQ and host:port. */
  async open(onLost: () => void): Promise<BrokerSession> {
    const abort = new AbortController();
    let publisher: TransportPublisher | undefined;
    let connection: TransportConnection | undefined;
    const request: ConnectRequest = {
      name: `converge-cdc-relay ${this.#options.relayId}`,
      signal: abort.signal,
      onClose: onLost,
      // No confirm can come while the broker reads nothing from us: waiting is not failing.
      onBlocked: () => publisher?.holdTimeouts(),
      onUnblocked: () => publisher?.resumeTimeouts(),
    };
    try {
      connection = await this.#transport.connect(request);
      publisher = await openConfirmChannel(connection, this.#options, {});
    } catch (err) {
      await connection?.close().catch(() => undefined);
      abort.abort();
      throw this.#transport.failure(err);
    }
    return new BrokerSession(publisher, connection);
  }
}

/** One stream session's connection and confirm channel (SessionLink.open). */
export class BrokerSession {
  constructor(
    readonly publisher: TransportPublisher,
    readonly connection: TransportConnection,
  ) {}

  /** Fails what is still in flight (channel-closed) and closes the connection. */
  async close(): Promise<void> {
    await this.publisher.close().catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }
}
