import { EventEmitter } from 'node:events';
import type amqp from 'amqplib';
import type { ConsumeMessage } from 'amqplib';
import type { ContentConflictError } from '../errors.js';
import { backoffDelay } from '../ops/backoff.js';
import { Idle, onShutdownSignals } from '../ops/idle.js';
import { describeError } from '../ops/logger.js';
import { openConnection } from '../transport/connection.js';
import { ConfirmPublisher } from '../transport/publisher.js';
import { resolveConsumerOptions, type ConsumerOptions, type ResolvedConsumerOptions } from './options.js';
import { ATTEMPT_HEADER, ORIGIN_EXCHANGE_HEADER, ORIGIN_ROUTING_KEY_HEADER } from './headers.js';
import { DeliveryProcessor, type Settlement } from './processor.js';

export interface ConsumerEvents {
  settled: [settlement: Settlement];
  conflict: [err: ContentConflictError];
  error: [err: Error];
}

export interface ConsumerStats {
  applied: number;
  duplicate: number;
  ignored: number;
  quarantined: number;
  retried: number;
}

/**
 * Subscribes a durable queue with manual acks and bounded prefetch. Each delivery runs
 * through the DeliveryProcessor (one local transaction) and is acked only after that
 * transaction committed. A delivery that must wait (version gap, outage, handler error)
 * is copied to `<queue>.retry` with a per-message expiry and dead-lettered back later; the
 * original is acked only once the broker confirmed the copy, so waiting never blocks the
 * queue behind it and never loses the event.
 */
export class Consumer extends EventEmitter<ConsumerEvents> {
  readonly options: ResolvedConsumerOptions;
  readonly stats: ConsumerStats = { applied: 0, duplicate: 0, ignored: 0, quarantined: 0, retried: 0 };
  readonly #processor: DeliveryProcessor;
  readonly #idle = new Idle();
  #connection: amqp.ChannelModel | undefined;
  #channel: amqp.Channel | undefined;
  #retryPublisher: ConfirmPublisher | undefined;
  #consumerTag: string | undefined;
  #inFlight: Promise<void> = Promise.resolve();
  #stopping = false;
  #stopped: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  #sessionEnded: (() => void) | undefined;
  #ready: Promise<void>;
  #markReady!: () => void;
  #removeSignals: (() => void) | undefined;

  constructor(options: ConsumerOptions) {
    super();
    this.options = resolveConsumerOptions(options);
    this.#processor = new DeliveryProcessor({ ...this.options, consumer: this.options.consumer });
    this.#ready = new Promise((resolve) => (this.#markReady = resolve));
  }

  start(): this {
    if (this.#loop) return this;
    if (this.options.handleSignals) this.#removeSignals = onShutdownSignals(() => this.stop());
    this.#loop = this.#run();
    return this;
  }

  /** Resolves once queues are declared and the subscription is active for the first time. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Stops taking deliveries, finishes the one in progress (commit, then ack), closes everything. */
  stop(): Promise<void> {
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  async #shutdown(): Promise<void> {
    this.#stopping = true;
    this.#idle.close();
    this.#sessionEnded?.();
    await this.#loop;
    this.#removeSignals?.();
    await this.#processor.close();
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#stopping) {
      try {
        await this.#session(() => (failures = 0));
      } catch (err) {
        failures++;
        const delay = backoffDelay(failures, this.options.reconnectBackoff);
        this.options.logger.warn({ ...describeError(err), attempt: failures, delayMs: delay }, 'consumer session failed; reconnecting');
        if (this.listenerCount('error') > 0) this.emit('error', err as Error);
        await this.#idle.sleep(delay);
      } finally {
        await this.#closeSession();
      }
    }
  }

  /** One connection's lifetime: declare, subscribe, then wait for the connection to end or stop(). */
  async #session(onConnected: () => void): Promise<void> {
    const ended = new Promise<void>((resolve) => (this.#sessionEnded = resolve));
    const connection = await openConnection(this.options.amqpUrl, `converge-consumer ${this.options.queue}`, this.options.logger, () => this.#sessionEnded?.());
    this.#connection = connection;
    const channel = await connection.createChannel();
    channel.on('error', (err: Error) => this.options.logger.warn(describeError(err), 'consumer channel error'));
    channel.on('close', () => this.#sessionEnded?.());
    this.#channel = channel;
    this.#retryPublisher = new ConfirmPublisher(await connection.createConfirmChannel());
    if (this.options.declare) await this.#declare(channel);
    await channel.prefetch(this.options.prefetch);
    const { consumerTag } = await channel.consume(this.options.queue, (message) => {
      if (message) this.#inFlight = this.#inFlight.then(() => this.#handle(channel, message));
    }, { noAck: false });
    this.#consumerTag = consumerTag;
    onConnected();
    this.#markReady();
    if (this.#stopping) return;
    await ended;
  }

  async #declare(channel: amqp.Channel): Promise<void> {
    const { queue, retryQueue, exchange } = this.options;
    await channel.assertExchange(exchange, 'topic', { durable: true });
    await channel.assertQueue(queue, { durable: true });
    for (const pattern of this.options.bindings) await channel.bindQueue(queue, exchange, pattern);
    // Expired copies go back to the main queue through the default exchange.
    await channel.assertQueue(retryQueue, { durable: true, arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue } });
  }

  async #handle(channel: amqp.Channel, message: ConsumeMessage): Promise<void> {
    let settlement: Settlement;
    try {
      settlement = await this.#processor.process(message);
    } catch (err) {
      // Processing itself broke (not a handler error): leave the delivery unacked for redelivery.
      this.options.logger.error(describeError(err), 'delivery processing failed unexpectedly');
      channel.nack(message, false, true);
      return;
    }
    if (settlement.action === 'retry') await this.#scheduleRetry(channel, message, settlement);
    else safeAck(channel, message);
    this.#count(settlement);
    this.emit('settled', settlement);
    if (settlement.action === 'ack' && settlement.outcome === 'quarantined' && settlement.conflict) this.emit('conflict', settlement.conflict);
  }

  async #scheduleRetry(channel: amqp.Channel, message: ConsumeMessage, settlement: Extract<Settlement, { action: 'retry' }>): Promise<void> {
    const publisher = this.#retryPublisher;
    try {
      if (!publisher) throw new Error('no retry channel');
      const messageId = typeof message.properties.messageId === 'string' ? message.properties.messageId : `unidentified-${message.fields.deliveryTag}`;
      await publisher.publish('', this.options.retryQueue, message.content, {
        ...message.properties,
        messageId,
        headers: { ...message.properties.headers, [ATTEMPT_HEADER]: settlement.attempt, ...originHeaders(message) },
        expiration: String(settlement.delayMs),
        persistent: true,
      }, 10_000);
      safeAck(channel, message);
    } catch (err) {
      this.options.logger.warn({ eventId: settlement.eventId, ...describeError(err) }, 'could not park delivery for retry; requeueing it after the backoff');
      // Holding the delivery for its backoff keeps a broken retry path from becoming a hot redelivery loop.
      await new Promise((resolve) => setTimeout(resolve, settlement.delayMs));
      try {
        channel.nack(message, false, true);
      } catch {
        // Channel already gone: the broker redelivers unacked messages by itself.
      }
    }
  }

  #count(settlement: Settlement): void {
    if (settlement.action === 'retry') this.stats.retried++;
    else this.stats[settlement.outcome]++;
  }

  async #closeSession(): Promise<void> {
    this.#sessionEnded = undefined;
    // Stop new deliveries first, then let the ones already taken commit and ack.
    if (this.#channel && this.#consumerTag) await this.#channel.cancel(this.#consumerTag).catch(() => undefined);
    this.#consumerTag = undefined;
    let settledUpTo: Promise<void>;
    do {
      settledUpTo = this.#inFlight;
      await settledUpTo;
    } while (settledUpTo !== this.#inFlight);
    const connection = this.#connection;
    this.#connection = undefined;
    this.#channel = undefined;
    await this.#retryPublisher?.close();
    this.#retryPublisher = undefined;
    await connection?.close().catch(() => undefined);
  }
}

/**
 * Where the delivery first came from. After a trip through the retry queue it arrives via the
 * default exchange under the queue's name, so the first values are carried in headers.
 */
function originHeaders(message: ConsumeMessage): Record<string, string> {
  const headers = message.properties.headers ?? {};
  return {
    [ORIGIN_EXCHANGE_HEADER]: String(headers[ORIGIN_EXCHANGE_HEADER] ?? message.fields.exchange),
    [ORIGIN_ROUTING_KEY_HEADER]: String(headers[ORIGIN_ROUTING_KEY_HEADER] ?? message.fields.routingKey),
  };
}

function safeAck(channel: amqp.Channel, message: ConsumeMessage): void {
  try {
    channel.ack(message);
  } catch {
    // The channel closed after commit: the broker redelivers and the inbox recognises the duplicate.
  }
}

/** Creates and starts a consumer; `await consumer.ready()` to know the subscription is live. */
export function startConsumer(options: ConsumerOptions): Consumer {
  return new Consumer(options).start();
}
