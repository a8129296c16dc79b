import { armExpiry, deadLettered, type DeathReason } from './in-process-dead-letter.js';
import { Queue, type Message } from './in-process-queue.js';
import { topicMatches } from './in-process-topic.js';

interface Binding {
  queue: string;
  pattern: string;
}

/**
 * The message store behind the in-process transport (in-process.ts): exchanges, bindings and
 * queues, routing, requeue and dead-lettering, and dispatch to subscribers. Connections,
 * publishers and subscriptions all work on this one object.
 */
export class InProcessBroker {
  readonly #exchanges = new Map<string, Binding[]>();
  readonly #queues = new Map<string, Queue>();

  /** Clears every expiry timer and forgets every queue and exchange. */
  clear(): void {
    for (const queue of this.#queues.values()) for (const message of queue.ready) clearTimeout(message.expiry);
    this.#queues.clear();
    this.#exchanges.clear();
  }

  /** Messages waiting in `queue` (not handed out). */
  depth(queue: string): number {
    return this.#queues.get(queue)?.ready.length ?? 0;
  }

  declareExchange(name: string): void {
    if (!this.#exchanges.has(name)) this.#exchanges.set(name, []);
  }

  declareQueue(name: string, deadLetterTo: string | null, deliveryLimit: number | null, messageTtlMs?: number): void {
    if (!this.#queues.has(name))
      this.#queues.set(name, new Queue(name, deadLetterTo, deliveryLimit, messageTtlMs ?? null));
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
    armExpiry(entry, queue.messageTtlMs, () => this.#expire(queue, entry));
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

  deadLetter(queue: Queue, message: Message, reason: DeathReason): void {
    clearTimeout(message.expiry);
    const target = queue.deadLetterTo === null ? undefined : this.#queues.get(queue.deadLetterTo);
    if (!target) return;
    this.enqueue(target, deadLettered(queue, message, target, reason));
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
