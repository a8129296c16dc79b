import pg from 'pg';
import { z } from 'zod';
import type { Executor } from '../db/executor.js';
import { withTransaction } from '../db/transaction.js';
import { DEFAULT_CONFIRM_TIMEOUT_MS } from '../runtime/defaults.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { defineOptions, schemaOption } from '../runtime/options.js';
import { copyProperties } from '../transport/property-encoding.js';
import type { TransportPublisher } from '../transport/transport.js';
import { newReplayToken, signedHeaders, withoutConvergeHeaders } from '../inbox/index.js';
import { openRow, quarantineIdOption, resolve, type QuarantinedMessage } from './dlq.js';
import { opsSql } from './sql.js';

export const replayQuarantinedOptions = defineOptions(
  'replayQuarantined',
  z.strictObject({
    id: quarantineIdOption.describe('Id of the open quarantined message to replay.'),
    queue: z.string().min(1).max(255).optional().meta({
      description:
        "Queue the message is published to (directly, through the default exchange). Default: the queue the row's consumer was last seen reading (the consumer registry), else the consumer's name, which is its queue unless the consumer set `consumer`.",
      defaultText: "the consumer's queue",
    }),
    schema: schemaOption,
    note: z.string().optional().describe('Recorded with the resolution, after the target queue.'),
  }),
);

export type ReplayQuarantinedOptions = z.input<typeof replayQuarantinedOptions.schema>;

/**
 * Sends an open quarantined message back through the normal consumer path: its raw body and
 * properties go to `queue` (by default the consumer's) through the default exchange, confirmed and mandatory (an unknown
 * queue fails the replay), and the row is closed as `replayed`. The consumer judges it again
 * (inbox, versions, conflicts) and records the outcome on this row (the message carries its
 * id in `x-converge-replay-of` and the random token stored on the row in `x-converge-replay-token`,
 * signed: see docs/security.md); a failure quarantines it anew in a new row.
 *
 * Given a pool, the row is closed in a transaction that commits only after the broker
 * confirmed the message: the consumer's writes to this row wait for that commit, so a quick
 * consumer neither records on an open row nor merges a renewed failure into it, and a failed
 * publish leaves the row open. A crash between confirm and commit means a second replay,
 * which the inbox recognises. Any other executor runs the same statements on the caller's
 * connection, inside the caller's transaction if there is one. `publisher` stays the caller's to
 * close: several replays can share one.
 */
export async function replayQuarantined(
  executor: Executor,
  publisher: TransportPublisher,
  input: ReplayQuarantinedOptions,
): Promise<ReplayReceipt> {
  const options = replayQuarantinedOptions.parse(input);
  const schema = schemaRef(options.schema);
  const replay = async (tx: Executor) => {
    const message = await openRow(tx, options.id, schema);
    const queue = options.queue ?? (await consumerQueue(tx, schema, message.consumer));
    const { rows } = await tx.query<{ key: Buffer }>(opsSql(schema).headerKey);
    // Only the consumer that gets this token back records an outcome on the row (a forged replay-of has none).
    const token = newReplayToken();
    // Closing first takes the row lock: a second operator replaying the same row waits, then finds it closed.
    const note = `to ${queue}${options.note ? `: ${options.note}` : ''}`;
    await resolve(tx, options.id, 'replayed', note, schema, token);
    const replayed = { id: options.id, token, key: rows[0]?.key ?? null };
    return { queue, ...(await publishReplay(publisher, queue, replayed, message)) };
  };
  return executor instanceof pg.Pool ? withTransaction(executor, replay, 0) : replay(executor);
}

/**
 * What a replay sent: `omittedHeaders` names the headers the transport could not carry (on
 * RabbitMQ, what amqplib cannot encode: transport/header-encoding.ts), which the copy lists in `x-converge-headers-omitted`;
 * `omittedProperties` the properties (transport/property-encoding.ts), listed in
 * `x-converge-properties-omitted` (a messageId too long is replaced by `sha256:<hex>` of it).
 */
export interface ReplayReceipt {
  /** Where the copy went: the queue given, or the consumer's. */
  queue: string;
  omittedHeaders: string[];
  omittedProperties: string[];
}

async function publishReplay(
  publisher: TransportPublisher,
  queue: string,
  replay: { id: string; token: string; key: Buffer | null },
  message: QuarantinedMessage,
): Promise<Omit<ReplayReceipt, 'queue'>> {
  const { id, token, key } = replay;
  const given = message.properties;
  // Signed with the messageId as the copy carries it (a substitute for one amqplib cannot write).
  const encoded = copyProperties({
    ...given,
    messageId: typeof given.messageId === 'string' ? given.messageId : `quarantine-${id}`,
  });
  const { headers = {}, messageId, ...properties } = encoded.properties;
  // The attempt counter starts again; the origin is the row's (checked when it was quarantined); an
  // earlier replay's headers give way to this one's, signed with the schema's header key.
  const own = signedHeaders(key, messageId, message.body, {
    ...(message.exchange === null ? {} : { originExchange: message.exchange }),
    ...(message.routingKey === null ? {} : { originRoutingKey: message.routingKey }),
    replayOf: id,
    replayToken: token,
  });
  const freshHeaders = { ...withoutConvergeHeaders(headers), ...own };
  const sent = publisher.carriedHeaders(freshHeaders);
  await publisher.publish(
    '',
    queue,
    message.body,
    { ...properties, headers: sent.headers, messageId, persistent: true },
    DEFAULT_CONFIRM_TIMEOUT_MS,
  );
  return { omittedHeaders: sent.omitted, omittedProperties: encoded.omitted };
}

/**
 * The queue a consumer reads: the newest its registry rows name (a consumer may set its inbox
 * scope apart from its queue), else the scope itself, which is the queue name by default.
 */
async function consumerQueue(executor: Executor, schema: SchemaRef, consumer: string): Promise<string> {
  const { rows } = await executor.query<{ queue: string }>(opsSql(schema).consumerQueue, [consumer]);
  return rows[0]?.queue ?? consumer;
}
