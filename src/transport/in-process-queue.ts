import type { MessageProperties } from './transport.js';

/** A message held by the in-process broker (in-process.ts). */
export interface Message {
  /** Arrival order in its queue; a requeued message goes back to its place. */
  seq: number;
  body: Buffer;
  exchange: string;
  routingKey: string;
  properties: MessageProperties;
  redelivered: boolean;
  /** Returns (nack with requeue, lost connection) so far. */
  returns: number;
  expiry?: NodeJS.Timeout;
}

/** What a queue hands its messages to: a subscription, within its prefetch window. */
export interface QueueSubscriber {
  readonly hasRoom: boolean;
  deliver(message: Message): void;
}

/** An in-memory queue: ready messages in order, handed to its subscribers within their prefetch. */
export class Queue {
  readonly ready: Message[] = [];
  readonly subscribers: QueueSubscriber[] = [];
  #next = 0;

  constructor(
    readonly name: string,
    /** Where expired, rejected or over-limit messages go; null drops them. */
    readonly deadLetterTo: string | null,
    /** Returns before a message is dead-lettered; null is no limit. */
    readonly deliveryLimit: number | null,
    /** Queue-level TTL (x-message-ttl) in ms; a message's own expiration applies if lower. Null: none. */
    readonly messageTtlMs: number | null = null,
  ) {}

  nextSeq(): number {
    return this.#next++;
  }
}
