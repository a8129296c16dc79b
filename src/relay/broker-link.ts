import type amqp from 'amqplib';
import { BrokerAddresses } from '../transport/broker-addresses.js';
import { brokerFailure, openConnection } from '../transport/connection.js';
import { ConfirmPublisher } from '../transport/publisher.js';
import type { ResolvedRelayOptions } from './options.js';

/**
 * The relay's one connection and confirm channel to RabbitMQ. Apart from the relay's claim →
 * publish → mark cycle so that the cycle only asks for a channel and drops it on failure; how
 * the channel is opened, shared and closed lives here.
 */
export class BrokerLink {
  readonly #options: ResolvedRelayOptions;
  readonly #brokers: BrokerAddresses;
  #connection: amqp.ChannelModel | undefined;
  #publisher: ConfirmPublisher | undefined;
  #opening: Promise<ConfirmPublisher> | undefined;

  constructor(options: ResolvedRelayOptions) {
    this.#options = options;
    this.#brokers = new BrokerAddresses(options.amqpUrl);
  }

  /** A confirm channel is open (it may still close before its next publish). */
  get open(): boolean {
    return this.#publisher !== undefined && !this.#publisher.closed;
  }

  /** The shared confirm channel; a failure to open it is thrown typed, naming RabbitMQ and host:port. */
  publisher(): Promise<ConfirmPublisher> {
    return this.#ensurePublisher().catch((err: unknown) => {
      throw brokerFailure(err, this.#brokers.target);
    });
  }

  #ensurePublisher(): Promise<ConfirmPublisher> {
    if (this.#publisher && !this.#publisher.closed) return Promise.resolve(this.#publisher);
    // Concurrent cycles share one channel; whoever comes first opens it for all.
    this.#opening ??= this.#openPublisher().finally(() => (this.#opening = undefined));
    return this.#opening;
  }

  async #openPublisher(): Promise<ConfirmPublisher> {
    const options = this.#options;
    if (!this.#connection) {
      this.#connection = await openConnection(
        this.#brokers,
        `converge-relay ${options.relayId}`,
        options.logger,
        () => {
          this.#connection = undefined;
        },
        options.amqpSocketOptions,
      );
    }
    const channel = await this.#connection.createConfirmChannel();
    if (options.declareExchange) await channel.assertExchange(options.exchange, 'topic', { durable: true });
    this.#publisher = new ConfirmPublisher(channel);
    return this.#publisher;
  }

  async close(): Promise<void> {
    const connection = this.#connection;
    await this.#publisher?.close();
    this.#publisher = undefined;
    this.#connection = undefined;
    await connection?.close().catch(() => undefined);
  }
}
