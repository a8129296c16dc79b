import type amqp from 'amqplib';
import type { ConsumeMessage } from 'amqplib';
import { describeError, silentLogger, type Logger } from '../runtime/logger.js';
import { ConfigError } from '../runtime/errors.js';
import { BrokerAddresses } from './broker-addresses.js';
import { headerRejectionOf } from './header-guard.js';
import { brokerFailure, openConnection, type AmqpSocketOptions } from './connection.js';
import { ConfirmPublisher } from './publisher.js';
import { queueSetArguments } from './queue-arguments.js';
import { checkExchangeTypeOn, inspectQueueOn, peekHeadOn } from './rabbitmq-queues.js';
import { CLOSE_GRACE_MS, closeWithin, withinDeadline } from './socket-control.js';
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

export interface RabbitMqTransportOptions {
  /** One URL, or a cluster's node URLs to fail over between (BrokerAddresses keeps their order). */
  urls: string | readonly string[] | BrokerAddresses;
  /** For amqplib's connect (TLS, EXTERNAL auth); never logged. */
  socketOptions?: AmqpSocketOptions;
  logger?: Logger;
}

/**
 * The production transport: amqplib underneath, with what converge always did on top: failover
 * between node URLs, a connect timeout, a socket that stop() can destroy, confirm channels that
 * report returns, blocked-connection notices, quorum queue sets with a delivery limit.
 */
export class RabbitMqTransport implements Transport {
  readonly kind = 'RabbitMQ';
  readonly brokers: BrokerAddresses;
  readonly #socketOptions: AmqpSocketOptions;
  readonly #logger: Logger;

  /** Throws ConnectionConfigError for a URL amqplib cannot use. */
  constructor(options: RabbitMqTransportOptions) {
    this.brokers = options.urls instanceof BrokerAddresses ? options.urls : new BrokerAddresses(options.urls);
    this.#socketOptions = options.socketOptions ?? {};
    this.#logger = options.logger ?? silentLogger;
  }

  failure(err: unknown): Error {
    return brokerFailure(err, this.brokers.target);
  }

  async connect(request: ConnectRequest): Promise<TransportConnection> {
    // Ours, so close() can destroy the socket of a broker that does not answer; the caller's aborts it too.
    const kill = new AbortController();
    const onAbort = () => kill.abort();
    if (request.signal.aborted) kill.abort();
    request.signal.addEventListener('abort', onAbort, { once: true });
    // amqplib passes unknown socket options on to net.connect/tls.connect; its types do not list `signal`.
    const socketOptions: AmqpSocketOptions & { signal: AbortSignal } = { ...this.#socketOptions, signal: kill.signal };
    let connection: amqp.ChannelModel;
    try {
      connection = await openConnection(
        this.brokers,
        request.name,
        this.#logger,
        (err) => {
          request.signal.removeEventListener('abort', onAbort);
          request.onClose(err);
        },
        socketOptions,
      );
    } catch (err) {
      request.signal.removeEventListener('abort', onAbort);
      throw err;
    }
    const { onBlocked, onUnblocked } = request;
    if (onBlocked) connection.on('blocked', (reason?: string) => onBlocked(reason));
    if (onUnblocked) connection.on('unblocked', () => onUnblocked());
    // A probe that the broker may answer by closing the connection gets one of its own (checkExchangeType).
    const openProbe = () =>
      openConnection(this.brokers, `${request.name} probe`, this.#logger, () => undefined, socketOptions);
    return new RabbitMqConnection(connection, { kill: () => kill.abort(), openProbe }, this.#logger);
  }
}

/** What a connection needs of its transport: to destroy its socket, and to open a probe connection. */
interface ConnectionControl {
  kill: () => void;
  openProbe: () => Promise<amqp.ChannelModel>;
}

class RabbitMqConnection implements TransportConnection {
  readonly #connection: amqp.ChannelModel;
  readonly #control: ConnectionControl;
  readonly #logger: Logger;
  readonly #publishers = new Set<ConfirmPublisher>();
  readonly #subscriptions = new Set<amqp.Channel>();

  constructor(connection: amqp.ChannelModel, control: ConnectionControl, logger: Logger) {
    this.#connection = connection;
    this.#control = control;
    this.#logger = logger;
  }

  async openPublisher(
    options: { declareExchange?: string; onConfirmTimeout?: () => void } = {},
  ): Promise<TransportPublisher> {
    const channel = await this.#connection.createConfirmChannel();
    if (options.declareExchange) await channel.assertExchange(options.declareExchange, 'topic', { durable: true });
    const publisher = new ConfirmPublisher(channel, options.onConfirmTimeout);
    this.#publishers.add(publisher);
    channel.on('close', () => this.#publishers.delete(publisher));
    return publisher;
  }

  /** The dead queue first, so the queue's dead-letter target exists before anything can die. */
  async declareQueues(set: QueueSet): Promise<void> {
    const channel = await this.#connection.createChannel();
    channel.on('error', () => undefined); // the failed call reports it
    try {
      const args = queueSetArguments(set.queue, set);
      if (set.deadQueue && args.dead) await channel.assertQueue(set.deadQueue, { durable: true, arguments: args.dead });
      await channel.assertExchange(set.exchange, 'topic', { durable: true });
      await channel.assertQueue(set.queue, { durable: true, arguments: args.main });
      for (const pattern of set.bindings) await channel.bindQueue(set.queue, set.exchange, pattern);
      await channel.assertQueue(set.retryQueue, { durable: true, arguments: args.retry });
      for (const [i, tier] of (set.retryTiers ?? []).entries())
        await channel.assertQueue(tier.queue, { durable: true, arguments: args.tiers[i] });
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  async subscribe(
    queue: string,
    onDelivery: (delivery: TransportDelivery) => void,
    options: SubscribeOptions,
  ): Promise<Subscription> {
    const channel = await this.#connection.createChannel();
    let cancelled = false;
    const ended = () => {
      if (cancelled) return;
      cancelled = true;
      options.onCancelled?.();
    };
    channel.on('error', (err: Error) =>
      this.#logger.warn({ queue, ...describeError(err) }, 'subscription channel error'),
    );
    channel.on('close', ended);
    this.#subscriptions.add(channel);
    channel.on('close', () => this.#subscriptions.delete(channel));
    await channel.prefetch(options.prefetch);
    const { consumerTag } = await channel.consume(
      queue,
      (message) => {
        // null is the broker cancelling us (queue deleted, or moved on a cluster).
        if (!message) return ended();
        onDelivery(deliveryOf(channel, message));
      },
      { noAck: false },
    );
    return {
      cancel: async () => {
        cancelled = true;
        // A broker that never sends cancel-ok must not hold up the caller.
        await withinDeadline(channel.cancel(consumerTag), CLOSE_GRACE_MS, () => new Error('no cancel-ok')).catch(
          () => undefined,
        );
      },
      // A channel close is ordered after the acks sent on it; the broker then returns the rest.
      close: () => channel.close().catch(() => undefined),
    };
  }

  inspectQueue(queue: string): Promise<QueueCounts | null> {
    return inspectQueueOn(this.#connection, queue);
  }

  peekHead(queue: string): Promise<QueueHeadMessage | null> {
    return peekHeadOn(this.#connection, queue);
  }

  async checkExchangeType(exchangeType: string, probeName: string): Promise<boolean> {
    return checkExchangeTypeOn(await this.#control.openProbe(), exchangeType, probeName);
  }

  /**
   * Subscription channels are closed before the connection: a channel close is ordered after the
   * acks sent on it, so the broker has them before it takes back what is still unacked; a bare
   * connection close can overtake them.
   */
  async close(): Promise<void> {
    const publishers = [...this.#publishers];
    const subscriptions = [...this.#subscriptions];
    const channels = {
      close: async () => {
        await Promise.all(subscriptions.map((channel) => channel.close().catch(() => undefined)));
        await Promise.all(publishers.map((p) => p.close()));
      },
    };
    await closeWithin(this.#connection, channels, this.#control.kill);
  }
}

function deliveryOf(channel: amqp.Channel, message: ConsumeMessage): TransportDelivery {
  const rejection = headerRejectionOf(message.properties);
  const properties = rejection
    ? {
        ...message.properties,
        undecodableHeaders: { bound: rejection.bound, detail: rejection.detail, raw: rejection.raw.toString('base64') },
      }
    : message.properties;
  return {
    content: message.content,
    fields: {
      exchange: message.fields.exchange,
      routingKey: message.fields.routingKey,
      redelivered: message.fields.redelivered,
      deliveryTag: message.fields.deliveryTag,
    },
    properties,
    ack: () => settleQuietly(() => channel.ack(message)),
    ackAllUpTo: () => settleQuietly(() => channel.ack(message, true)),
    nack: ({ requeue }) => settleQuietly(() => channel.nack(message, false, requeue)),
  };
}

/** A settle on a closed channel is moot: the broker returns the delivery and redelivers it. */
function settleQuietly(settle: () => void): void {
  try {
    settle();
  } catch {
    // see above
  }
}

/**
 * The transport an engine's resolved options name (relays and consumer alike), else RabbitMQ at
 * their amqpUrl: their options refuse to resolve with neither, so this throws only when called
 * with unresolved options.
 */
export function transportFor(options: {
  transport?: Transport | undefined;
  amqpUrl?: readonly string[] | undefined;
  amqpSocketOptions: AmqpSocketOptions;
  logger: Logger;
}): Transport {
  if (options.transport !== undefined) return options.transport;
  if (options.amqpUrl === undefined) throw new ConfigError('amqpUrl', 'is required unless transport is given');
  return new RabbitMqTransport({
    urls: options.amqpUrl,
    socketOptions: options.amqpSocketOptions,
    logger: options.logger,
  });
}
