import { z } from 'zod';
import { amqpUrlOption } from '../runtime/options.js';
import { retryTiersOption } from '../transport/queue-arguments.js';
import { amqpSocketOptionsOption } from '../transport/transport-option.js';
import { consumerQueues, readQueueHeads, type QueueHead } from '../transport/queue-age.js';

/** Default slack on the age of the oldest waiting message: clock skew, and heads younger than what waits behind them. */
export const DEFAULT_BROKER_MARGIN_MS = 3_600_000;

/** The `broker` option of cleanup and compactInbox, declared once. */
export const brokerRetentionOption = z
  .strictObject({
    amqpUrl: amqpUrlOption
      .unwrap()
      .describe("RabbitMQ URL, or a cluster's node URLs, where the consumers' queues live."),
    amqpSocketOptions: amqpSocketOptionsOption,
    queues: z
      .array(z.string().min(1).max(200))
      .min(1)
      .describe(
        "The consumers' queues (as startConsumer's `queue`); each is read with its retry tiers, `<queue>.retry` and `<queue>.dead`.",
      ),
    retryTiersMs: retryTiersOption.describe("The consumers' retryTiersMs, so their tier queues are read too."),
    marginMs: z
      .number()
      .int()
      .min(0)
      .default(DEFAULT_BROKER_MARGIN_MS)
      .describe(
        'Added to the age of the oldest waiting message: covers clock skew and messages behind a queue head whose event is older than the head.',
      ),
  })
  .optional()
  .describe(
    "Where the consumers' messages wait: inbox rows younger than the oldest of them (plus marginMs) are kept. Without it, rows go by age alone and the result carries a warning.",
  );

export type BrokerRetentionOptions = NonNullable<z.output<typeof brokerRetentionOption>>;

/** How the broker bounded one inbox deletion; part of CleanupResult and CompactionResult. */
export interface BrokerCheck {
  /**
   * `not-configured`: no broker given, rows went by age alone (see `warning`); `empty`: nothing waits;
   * `bounded`: the oldest waiting message set the bound; `unknown-age`: a message of unknown age waits, so no inbox row was deleted.
   */
  status: 'not-configured' | 'empty' | 'bounded' | 'unknown-age';
  /** The queue whose head set the bound (or whose head had no timestamp). */
  queue: string | null;
  /** Age of the oldest waiting message, in ms, when known. */
  oldestMessageAgeMs: number | null;
  /** The retention the inbox deletion used, in ms; null when it deleted nothing because of the broker. */
  appliedRetentionMs: number | null;
  warning?: string;
}

export const NOT_CONFIGURED_WARNING =
  "no broker given: inbox rows were deleted by age alone, without checking for older messages still waiting in the consumers' queues (docs/operations.md, retention)";

/**
 * The inbox retention the broker allows. A waiting message is a copy of an event whose inbox row,
 * if any, was written after the event occurred; the head's timestamp is that occurredAt. So rows
 * received since the oldest head (less the margin) stay. A non-empty queue whose head has no
 * timestamp is of unknown age: nothing may go. Pure; `nowMs` is the caller's clock.
 */
export function boundInboxRetention(
  retentionMs: number,
  heads: readonly QueueHead[] | null,
  nowMs: number,
  marginMs: number,
): BrokerCheck {
  if (heads === null)
    return {
      status: 'not-configured',
      queue: null,
      oldestMessageAgeMs: null,
      appliedRetentionMs: retentionMs,
      warning: NOT_CONFIGURED_WARNING,
    };
  const waiting = heads.filter((head) => head.exists && head.messages > 0);
  const unknown = waiting.find((head) => head.headTimestampMs === null);
  if (unknown)
    return { status: 'unknown-age', queue: unknown.queue, oldestMessageAgeMs: null, appliedRetentionMs: null };
  if (waiting.length === 0)
    return { status: 'empty', queue: null, oldestMessageAgeMs: null, appliedRetentionMs: retentionMs };
  const oldest = waiting.reduce((a, b) => (b.headTimestampMs! < a.headTimestampMs! ? b : a));
  const ageMs = Math.max(0, nowMs - oldest.headTimestampMs!);
  return {
    status: 'bounded',
    queue: oldest.queue,
    oldestMessageAgeMs: ageMs,
    appliedRetentionMs: Math.max(retentionMs, ageMs + marginMs),
  };
}

/** Reads the heads of every queue `broker` names (null without one) and bounds `retentionMs` by them. */
export async function checkBroker(
  retentionMs: number,
  broker: BrokerRetentionOptions | undefined,
  now: () => number = Date.now,
): Promise<BrokerCheck> {
  if (!broker) return boundInboxRetention(retentionMs, null, now(), 0);
  const queues = broker.queues.flatMap((queue) => consumerQueues(queue, broker.retryTiersMs));
  const heads = await readQueueHeads(broker.amqpUrl, queues, broker.amqpSocketOptions ?? {});
  return boundInboxRetention(retentionMs, heads, now(), broker.marginMs);
}
