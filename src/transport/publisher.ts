import type { ConfirmChannel, Message, Options } from 'amqplib';
import { PublishError } from '../runtime/errors.js';
import { encodableHeaders, headerTableBudget, type EncodableHeaders } from './header-encoding.js';
import { encodableProperties } from './property-encoding.js';
import type { CarriedHeaders, TransportPublisher } from './transport.js';

/** One publish waiting for its confirm. */
interface Pending {
  resolve(): void;
  reject(err: PublishError): void;
  timeoutMs: number;
  /** The timer it counts on, none while timeouts are held. */
  timer: TimeoutGroup | undefined;
}

/**
 * One confirm timeout shared by the publishes armed in the same turn of the event loop with the
 * same timeout: a relay writes a whole batch in one turn, and a timer per message cost it more
 * than the publish itself. The members fire together, as their own timers would have.
 */
interface TimeoutGroup {
  handle: NodeJS.Timeout | undefined;
  members: Pending[];
  /** Members still waiting; at 0 the timer is cleared so an idle publisher holds no timer. */
  waiting: number;
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
  /** Groups still open for publishes of this turn, by timeout. */
  readonly #arming = new Map<number, TimeoutGroup>();
  readonly #groups = new Set<TimeoutGroup>();
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
    // Before amqplib's own close listener, which fails every unconfirmed callback like a nack: a
    // channel the broker closed (404 for a missing exchange, 403) is channel-closed, not nacked.
    channel.prependListener('close', () => this.#failAll('channel-closed'));
    channel.on('error', () => undefined);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Resolves once the broker confirmed and routed the message; rejects with PublishError
   * ('nacked' | 'returned' | 'confirm-timeout' | 'channel-closed' | 'unencodable'). Every publish needs a
   * distinct `messageId` while in flight on this channel.
   */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Options.Publish & { messageId: string },
    timeoutMs: number,
  ): Promise<void> {
    if (this.#closed) return Promise.reject(new PublishError('channel-closed'));
    // What amqplib cannot carry is left out and named (property-encoding.ts); a messageId too long
    // for AMQP is replaced, and a return names the message by what was sent.
    const { properties } = encodableProperties(options);
    const messageId = properties.messageId;
    let pending!: Pending;
    const result = new Promise<void>((resolve, reject) => {
      pending = { resolve, reject, timeoutMs, timer: undefined };
    });
    this.#pending.add(pending);
    if (!this.#timeoutsHeld) this.#arm(pending);
    // amqplib buffers when the socket is busy; callers bound the in-flight window by batch size.
    const sent = { ...properties, mandatory: true, ...this.#carried(properties.headers) };
    try {
      this.#channel.publish(exchange, routingKey, content, sent, (err: unknown) => {
        const returns = this.#returned.size === 0 ? 0 : (this.#returned.get(messageId) ?? 0);
        if (returns > 0) {
          if (returns === 1) this.#returned.delete(messageId);
          else this.#returned.set(messageId, returns - 1);
        }
        if (err) this.#settle(pending, new PublishError(this.#closed ? 'channel-closed' : 'nacked'));
        else if (returns > 0) this.#settle(pending, new PublishError('returned', 'no queue bound for the routing key'));
        else this.#settle(pending, null);
      });
    } catch (err) {
      // amqplib encodes before it sends or registers the confirm callback, so nothing went out and
      // no confirm will come: left pending, the entry would time out later and mark the channel suspect.
      this.#settle(pending, new PublishError('unencodable', refusal(err)));
    }
    return result;
  }

  /**
   * The headers as amqplib can encode them faithfully within this connection's frame (see
   * header-encoding.ts); a copy of a delivery carries what its producer sent, which amqplib's
   * encoder does not always take back. The same goes for the other properties (above).
   */
  #carried(headers: unknown): { headers?: Record<string, unknown> } {
    return headers === undefined ? {} : { headers: publishableHeaders(this.#channel, headers).headers };
  }

  carriedHeaders(headers: Record<string, unknown>): CarriedHeaders {
    const { headers: carried, omitted } = publishableHeaders(this.#channel, headers);
    return { headers: carried, omitted };
  }

  /**
   * Stops the confirm timeouts of publishes in flight and of new ones, e.g. while the broker
   * blocks the connection (a resource alarm): the broker has not refused anything, it only reads
   * nothing until the alarm clears, and then confirms as usual.
   */
  holdTimeouts(): void {
    this.#timeoutsHeld = true;
    this.#disarmAll();
  }

  /** Gives every publish in flight its full confirm timeout again, from now. */
  resumeTimeouts(): void {
    this.#timeoutsHeld = false;
    this.#disarmAll();
    for (const pending of this.#pending) this.#arm(pending);
  }

  /** Once settled (a timeout included) it is gone from #pending: a late ack finds nothing to resolve. */
  #settle(pending: Pending, err: PublishError | null): void {
    if (!this.#pending.delete(pending)) return;
    const group = pending.timer;
    if (group !== undefined && --group.waiting === 0) this.#dropGroup(group);
    if (err) pending.reject(err);
    else pending.resolve();
    if (this.#pending.size === 0) this.#retired?.();
  }

  /** Starts the full confirm timeout of `pending`, on the timer of its turn. */
  #arm(pending: Pending): void {
    let group = this.#arming.get(pending.timeoutMs);
    if (group === undefined) {
      const opened: TimeoutGroup = { handle: undefined, members: [], waiting: 0 };
      opened.handle = setTimeout(() => this.#expire(opened), pending.timeoutMs);
      this.#arming.set(pending.timeoutMs, opened);
      this.#groups.add(opened);
      // Closed at the end of this turn: later publishes get a timer of their own.
      if (this.#arming.size === 1) queueMicrotask(() => this.#arming.clear());
      group = opened;
    }
    group.members.push(pending);
    group.waiting++;
    pending.timer = group;
  }

  #expire(group: TimeoutGroup): void {
    this.#dropGroup(group);
    for (const pending of group.members) {
      if (pending.timer !== group || !this.#pending.has(pending)) continue;
      this.#settle(pending, new PublishError('confirm-timeout', `${pending.timeoutMs} ms`));
      this.#onConfirmTimeout?.();
    }
  }

  #dropGroup(group: TimeoutGroup): void {
    clearTimeout(group.handle);
    this.#groups.delete(group);
    for (const [timeoutMs, open] of this.#arming) if (open === group) this.#arming.delete(timeoutMs);
  }

  #disarmAll(): void {
    for (const group of [...this.#groups]) this.#dropGroup(group);
    for (const pending of this.#pending) pending.timer = undefined;
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
    for (const pending of [...this.#pending]) this.#settle(pending, new PublishError(reason));
  }
}

/** `headers` as a ConfirmPublisher on `channel` sends them (header-encoding.ts, within the frame size its connection negotiated). */
function publishableHeaders(channel: ConfirmChannel, headers: unknown): EncodableHeaders {
  const frameMax = (channel as unknown as { connection?: { frameMax?: unknown } }).connection?.frameMax;
  return encodableHeaders(headers, headerTableBudget(typeof frameMax === 'number' ? frameMax : 0));
}

/** amqplib's refusal, naming the property at most: some of its messages quote a value. */
function refusal(err: unknown): string {
  const field = err instanceof Error ? /^Field '(\w+)'/.exec(err.message)?.[1] : undefined;
  const kind = err instanceof Error ? err.name : typeof err;
  return `amqplib could not encode the message (${kind}${field ? ` in property ${field}` : ''})`;
}
