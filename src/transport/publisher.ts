import type { ConfirmChannel, Message, Options } from 'amqplib';
import { PublishError } from '../runtime/errors.js';
import type { TransportPublisher } from './transport.js';

interface Pending {
  settle(err: PublishError | null): void;
  /** Starts (or restarts) the full confirm timeout. */
  arm(): void;
  disarm(): void;
}

/**
 * Publishes on a confirm channel and reports success only when the broker acked the
 * message AND did not return it as unroutable. RabbitMQ sends `basic.return` before the
 * `basic.ack` of the same message on the same channel, so by the time the ack callback runs
 * we already know whether it came back. A returned message is still acked by the broker,
 * which is why an ack alone is never taken as "delivered to a queue".
 */
export class ConfirmPublisher implements TransportPublisher {
  readonly #channel: ConfirmChannel;
  readonly #returned = new Map<string, number>();
  readonly #pending = new Set<Pending>();
  #closed = false;
  #timeoutsHeld = false;
  #retired: (() => void) | undefined;

  readonly #onConfirmTimeout: (() => void) | undefined;

  /**
   * `onConfirmTimeout` runs on the first confirm timeout: a channel that let one confirm go
   * missing is suspect, and its owner should stop sending on it before the next publish.
   */
  constructor(channel: ConfirmChannel, onConfirmTimeout?: () => void) {
    this.#channel = channel;
    this.#onConfirmTimeout = onConfirmTimeout;
    channel.on('return', (message: Message) => this.#noteReturn(message));
    channel.on('close', () => this.#failAll('channel-closed'));
    channel.on('error', () => undefined);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Resolves once the broker confirmed and routed the message; rejects with PublishError
   * ('nacked' | 'returned' | 'confirm-timeout' | 'channel-closed'). Every publish needs a
   * distinct `messageId` while in flight on this channel.
   */
  async publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Options.Publish & { messageId: string },
    timeoutMs: number,
  ): Promise<void> {
    if (this.#closed) throw new PublishError('channel-closed');
    const messageId = options.messageId;
    const result = new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const pending: Pending = {
        // Once settled (a timeout included) it is gone from #pending: a late ack finds nothing to resolve.
        settle: (err) => {
          if (!this.#pending.delete(pending)) return;
          pending.disarm();
          if (err) reject(err);
          else resolve();
          if (this.#pending.size === 0) this.#retired?.();
        },
        arm: () => {
          pending.disarm();
          timer = setTimeout(() => {
            pending.settle(new PublishError('confirm-timeout', `${timeoutMs} ms`));
            this.#onConfirmTimeout?.();
          }, timeoutMs);
        },
        disarm: () => clearTimeout(timer),
      };
      this.#pending.add(pending);
      if (!this.#timeoutsHeld) pending.arm();
      // amqplib buffers when the socket is busy; callers bound the in-flight window by batch size.
      this.#channel.publish(exchange, routingKey, content, { ...options, mandatory: true }, (err: unknown) => {
        const returns = this.#returned.get(messageId) ?? 0;
        if (returns > 0) {
          if (returns === 1) this.#returned.delete(messageId);
          else this.#returned.set(messageId, returns - 1);
        }
        if (err) pending.settle(new PublishError(this.#closed ? 'channel-closed' : 'nacked'));
        else if (returns > 0) pending.settle(new PublishError('returned', 'no queue bound for the routing key'));
        else pending.settle(null);
      });
    });
    return result;
  }

  /**
   * Stops the confirm timeouts of publishes in flight and of new ones, e.g. while the broker
   * blocks the connection (a resource alarm): the broker has not refused anything, it only reads
   * nothing until the alarm clears, and then confirms as usual.
   */
  holdTimeouts(): void {
    this.#timeoutsHeld = true;
    for (const pending of this.#pending) pending.disarm();
  }

  /** Gives every publish in flight its full confirm timeout again, from now. */
  resumeTimeouts(): void {
    this.#timeoutsHeld = false;
    for (const pending of this.#pending) pending.arm();
  }

  /**
   * Closes the channel once the publishes in flight on it have settled, without failing them;
   * the owner sends nothing more on it meanwhile. Resolves when it is closed.
   */
  retire(): Promise<void> {
    if (this.#pending.size === 0) return this.close();
    return new Promise((resolve) => {
      this.#retired = () => {
        this.#retired = undefined;
        void this.close().then(resolve);
      };
    });
  }

  /**
   * Fails every publish in flight with 'channel-closed', then closes the channel. The failures
   * come first: a closing channel ignores the confirms still on their way, and a broker that
   * does not answer the close must not leave the publishes waiting.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#failAll('channel-closed');
    await this.#channel.close().catch(() => undefined);
  }

  #noteReturn(message: Message): void {
    const id = message.properties.messageId as string | undefined;
    if (id !== undefined) this.#returned.set(id, (this.#returned.get(id) ?? 0) + 1);
  }

  #failAll(reason: 'channel-closed'): void {
    this.#closed = true;
    for (const pending of [...this.#pending]) pending.settle(new PublishError(reason));
  }
}
