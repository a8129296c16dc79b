import { rabbitMqTransportFor } from '../../transport/rabbitmq.js';
import { withinDeadline } from '../../transport/socket-control.js';
import type { Transport, TransportConnection, TransportPublisher } from '../../transport/transport.js';
import type { ResolvedCdcRelayOptions } from './options.js';

/**
 * One connection and confirm channel per stream session. A session that stops (a return, nack,
 * lost confirm, or stop()) closes both before the next one starts, so publishes of the next
 * session never interleave with late ones of the last: the retried event is the first one sent.
 */
export class CdcBroker {
  readonly #options: ResolvedCdcRelayOptions;
  readonly #transport: Transport;

  constructor(options: ResolvedCdcRelayOptions) {
    this.#options = options;
    this.#transport = options.transport ?? rabbitMqTransportFor(options);
  }

  /** Opens a session's channel; a failure is thrown typed, naming RabbitMQ and host:port. */
  async open(onLost: () => void): Promise<BrokerSession> {
    const abort = new AbortController();
    let publisher: TransportPublisher | undefined;
    let connection: TransportConnection | undefined;
    try {
      connection = await this.#transport.connect({
        name: `converge-cdc-relay ${this.#options.relayId}`,
        signal: abort.signal,
        onClose: onLost,
        // No confirm can come while the broker reads nothing from us: waiting is not failing.
        onBlocked: () => publisher?.holdTimeouts(),
        onUnblocked: () => publisher?.resumeTimeouts(),
      });
      const opened = connection;
      publisher = await withinDeadline(
        opened.openPublisher(this.#options.declareExchange ? { declareExchange: this.#options.exchange } : {}),
        this.#options.confirmTimeoutMs,
        () => new Error(`no confirm channel within ${this.#options.confirmTimeoutMs} ms`),
      );
    } catch (err) {
      await connection?.close().catch(() => undefined);
      abort.abort();
      throw this.#transport.failure(err);
    }
    return new BrokerSession(publisher, connection);
  }
}

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
