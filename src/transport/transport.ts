/**
 * The seam between converge and a message broker: what the relay and the consumer need of one,
 * and nothing more. RabbitMQ implements it (rabbitmq.ts, the production transport); so does an
 * in-memory broker for one process (in-process.ts, for development and tests, not a broker).
 * test/conformance/transport.ts holds both to the same contract.
 *
 * The model is AMQP's, reduced: topic exchanges route by routing key to bound queues; a publish
 * succeeds only once confirmed and routed (mandatory); a queue delivers FIFO to its subscriber,
 * with a prefetch window; a nacked (requeue) delivery or one left unacked when its connection
 * ends comes back with `redelivered` set; a queue may dead-letter what expires or is rejected
 * into another queue, which is how delayed retry works (a copy waits in a retry tier
 * `<queue>.retry.<delay>`, whose queue-level TTL caps its own expiry, and dead-letters back into `<queue>`).
 */
import type { QueueType, RetryTier } from './queue-arguments.js';

/** AMQP basic properties converge sets and reads; the transport carries them unchanged. */
export interface MessageProperties {
  /** The eventId; a publish needs one distinct among those in flight on its publisher. */
  messageId: string;
  type?: string;
  contentType?: string;
  /** Seconds since the epoch. */
  timestamp?: number;
  persistent?: boolean;
  appId?: string;
  headers?: Record<string, unknown>;
  /**
   * A per-message delay in ms (AMQP's expiration, sent as a decimal string): after it the message
   * leaves its queue and goes to the queue's dead-letter target. Delayed retry uses it.
   */
  expiration?: string | number;
}

/**
 * A confirm channel: every publish is mandatory. Resolves once the broker confirmed the message
 * and routed it to at least one queue; rejects with PublishError 'nacked' | 'returned'
 * (unroutable) | 'confirm-timeout' | 'channel-closed'.
 */
export interface TransportPublisher {
  publish(
    exchange: string,
    routingKey: string,
    body: Buffer,
    properties: MessageProperties,
    timeoutMs: number,
  ): Promise<void>;
  /** True once closed or lost: the owner opens a new one. */
  readonly closed: boolean;
  /** Stops confirm timeouts (the broker blocks the connection: waiting is not failing). */
  holdTimeouts(): void;
  /** Gives every publish in flight its full confirm timeout again, from now. */
  resumeTimeouts(): void;
  /** Fails what is in flight with 'channel-closed', then closes. */
  close(): Promise<void>;
  /** Closes once what is in flight has settled, without failing it; nothing new is sent on it meanwhile. */
  retire(): Promise<void>;
  /**
   * `headers` as this publisher would send them: what the transport cannot carry faithfully is
   * left out and named in `omitted` (top-level names, never values), for a caller that reports it.
   */
  carriedHeaders(headers: Record<string, unknown>): CarriedHeaders;
}

/** What carriedHeaders keeps of a header table, and the names it had to leave out. */
export interface CarriedHeaders {
  headers: Record<string, unknown>;
  omitted: string[];
}

/** A queue as the broker counts it now. */
export interface QueueCounts {
  /** Ready messages: not those a subscriber holds unsettled. */
  messages: number;
  consumers: number;
}

/** The head message of a queue, read without taking it away. */
export interface QueueHeadMessage {
  properties: Partial<MessageProperties>;
}

/**
 * A header table the transport would not decode (over the bounds of transport/header-bounds.ts,
 * or malformed): the delivery comes with empty headers and this instead, and the consumer
 * quarantines it as `undecodable-headers`. Only the transport sets it (no AMQP property has the name).
 */
export interface UndecodableHeaders {
  bound: 'depth' | 'entries' | 'bytes' | 'malformed' | 'prototype-key';
  /** Names the bound and byte offsets, never content. */
  detail: string;
  /** The table's bytes as they arrived (or the whole properties, when those are malformed), base64. */
  raw: string;
}

/** One message handed to a subscriber; settle it exactly once. */
export interface TransportDelivery {
  content: Buffer;
  fields: { exchange: string; routingKey: string; redelivered: boolean; deliveryTag: number };
  properties: Partial<MessageProperties> & {
    headers?: Record<string, unknown>;
    undecodableHeaders?: UndecodableHeaders;
  };
  ack(): void;
  /** Acks this delivery and every earlier unsettled one of its subscription, in one go (AMQP ack-multiple). */
  ackAllUpTo(): void;
  /** requeue: back to the queue (redelivered, counted towards a delivery limit); else dead-lettered or dropped. */
  nack(options: { requeue: boolean }): void;
}

export interface Subscription {
  /** Stops new deliveries; those already handed out can still be settled. */
  cancel(): Promise<void>;
  /**
   * Ends the subscription as its connection's end would: what it holds unsettled goes back to the
   * queue (redelivered). For a connection shared by several owners (shared-connection.ts), where
   * one owner's close must not take the others' subscriptions with it.
   */
  close?(): Promise<void>;
}

export interface SubscribeOptions {
  /** Unsettled deliveries at most; the next comes once one is settled. */
  prefetch: number;
  /** The broker ended the subscription (queue deleted, moved on a cluster); not called after cancel(). */
  onCancelled?: () => void;
}

/** A consumer's queues, as transport/queue-arguments.ts describes them. */
export interface QueueSet {
  queue: string;
  /**
   * `<queue>.retry`, the single retry queue of earlier versions: still declared (as it was) so the
   * copies waiting in it drain back after an upgrade; nothing new is sent to it.
   */
  retryQueue: string;
  /** The retry tiers, shortest first; a retry copy goes to the one chooseRetryTier picks. None when absent. */
  retryTiers?: readonly RetryTier[];
  /** `<queue>.dead` for quorum sets, null for classic ones. */
  deadQueue: string | null;
  exchange: string;
  bindings: readonly string[];
  queueType: QueueType;
  /** Quorum only: returns of one message before it is dead-lettered into the dead queue. */
  deliveryLimit: number;
}

/** What the owner of a connection hears about it. */
export interface ConnectRequest {
  /** Shown by the broker (connection_name), e.g. `converge-relay <id>`. */
  name: string;
  /** Aborting fails a connect in progress at once and destroys an open connection without a goodbye. */
  signal: AbortSignal;
  /** The connection ended, lost or closed; everything opened on it is gone. */
  onClose: (err?: Error) => void;
  /** The broker stopped reading from the connection (resource alarm). */
  onBlocked?: (reason: string | undefined) => void;
  onUnblocked?: () => void;
}

/** One connection: what lives on it ends with it, and unacked deliveries go back to their queues. */
export interface TransportConnection {
  /** A confirm channel; `declareExchange` is declared (topic, durable) on it first. */
  openPublisher(options?: { declareExchange?: string; onConfirmTimeout?: () => void }): Promise<TransportPublisher>;
  /** Declares the exchange, the queue with its bindings, its retry tiers and legacy retry queue and (quorum) its dead queue. Idempotent. */
  declareQueues(set: QueueSet): Promise<void>;
  subscribe(
    queue: string,
    onDelivery: (delivery: TransportDelivery) => void,
    options: SubscribeOptions,
  ): Promise<Subscription>;
  /** The queue's counts, or null when there is no such queue; the connection survives either way. */
  inspectQueue(queue: string): Promise<QueueCounts | null>;
  /**
   * The head message's properties, leaving it in place; null when the queue is empty or missing.
   * On RabbitMQ that is a get and a requeue: the message comes back `redelivered`, and on a quorum
   * queue (before 4.3) the return counts towards its delivery limit.
   */
  peekHead(queue: string): Promise<QueueHeadMessage | null>;
  /**
   * Whether the broker knows exchanges of `exchangeType` (e.g. `x-consistent-hash`, from a plugin).
   * RabbitMQ can only tell by declaring one: a throwaway internal exchange `probeName`, deleted again,
   * on a connection of its own (a refusal closes the whole connection). Other failures reject.
   */
  checkExchangeType(exchangeType: string, probeName: string): Promise<boolean>;
  /** Closes politely; a broker that does not answer within a short grace gets its socket destroyed. */
  close(): Promise<void>;
}

/** Opens connections to one broker (or one cluster). Holds no connection itself. */
export interface Transport {
  /** What errors and logs name: e.g. `RabbitMQ` or `in-process`. */
  readonly kind: string;
  connect(request: ConnectRequest): Promise<TransportConnection>;
  /** The typed error (ConnectionConfigError, ServiceUnavailableError) for a failed connect or channel open. */
  failure(err: unknown): Error;
}
