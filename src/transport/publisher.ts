import type { ConfirmChannel, Message, Options } from 'amqplib';
import { PublishError } from '../runtime/errors.js';

interface Pending {
  settle(err: PublishError | null): void;
}

/**
 * Publishes on a confirm channel and reports success only when the broker acked the
 * message AND did not return it as unroutable. RabbitMQ sends `basic.return` before the
 * `basic.ack` of the same message on the same channel, so by the time the ack callback runs
 * we already know whether it came back. A returned message is still acked by the broker,
 * which is why an ack alone is never taken as "delivered to a queue".
 */
export class ConfirmPublisher {
  readonly #channel: ConfirmChannel;
  readonly #returned = new Map<string, number>();
  readonly #pending = new Set<Pending>();
  #closed = false;

  constructor(channel: ConfirmChannel) {
    this.#channel = channel;
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
      const pending: Pending = {
        settle: (err) => {
          if (!this.#pending.delete(pending)) return;
          clearTimeout(timer);
          if (err) reject(err);
          else resolve();
        },
      };
      this.#pending.add(pending);
      // Declared after `pending` but read only when it settles, which is always later than this line.
      const timer = setTimeout(() => pending.settle(new PublishError('confirm-timeout', `${timeoutMs} ms`)), timeoutMs);
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

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#channel.close().catch(() => undefined);
    this.#failAll('channel-closed');
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
