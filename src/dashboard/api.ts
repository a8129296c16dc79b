/**
 * The JSON API over the ops functions. Reads (`GET /api/status`) return counts, ids and
 * findings, never bodies; the actions (`POST /api/quarantine/:id/show|replay|discard`) run
 * only after the server's checks and return what the operator asked for, a body with its
 * sensitive payload fields masked (displayQuarantined). Nothing here logs a
 * body, a header value or a request body.
 */
import type pg from 'pg';
import {
  discardQuarantined,
  displayQuarantined,
  listQuarantine,
  replayQuarantined,
  showQuarantined,
  type WatchedQueue,
} from '../ops/index.js';
import { ConfigError, ConvergeError, QuarantineNotFoundError, QuarantineResolvedError } from '../runtime/errors.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { RabbitMqTransport } from '../transport/rabbitmq.js';
import type { Sampler } from './sampler.js';
import { withConnection } from '../transport/short-lived.js';

export interface ApiContext {
  pool: pg.Pool;
  schema: string;
  amqpUrl: string | readonly string[] | undefined;
  queues: WatchedQueue[];
  sampler: Sampler;
  sampleIntervalMs: number;
  logger: Logger;
}

export interface ApiResponse {
  status: number;
  body: unknown;
}

/** Closed rows shown under the open ones, so a replay's outcome stays visible for a while. */
const QUARANTINE_ROWS = 50;

export async function readDashboard(context: ApiContext): Promise<ApiResponse> {
  const quarantine = await listQuarantine(context.pool, {
    schema: context.schema,
    includeResolved: true,
    limit: QUARANTINE_ROWS,
  });
  return {
    status: 200,
    body: {
      status: context.sampler.latest(),
      samplingError: context.sampler.error(),
      history: context.sampler.history(),
      sampleIntervalMs: context.sampleIntervalMs,
      replayEnabled: context.amqpUrl !== undefined,
      queues: context.queues.map((q) => ({ queue: q.queue, consumer: q.consumer ?? q.queue })),
      quarantine,
    },
  };
}

export type Action = 'show' | 'replay' | 'discard';

/**
 * Runs one action on quarantine row `id`; `input` is the parsed JSON body. Replay and discard
 * answer after a fresh sample: the page reads the status as soon as they answer, and the
 * sampled findings would otherwise still count the row as open until the next tick.
 */
export async function runAction(context: ApiContext, action: Action, id: string, input: unknown): Promise<ApiResponse> {
  const body = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  try {
    const result = await ACTIONS[action](context, id, body);
    context.logger.info({ action, id }, `dashboard: ${action} quarantined message`);
    return result;
  } catch (err) {
    context.logger.warn({ action, id, ...describeError(err) }, `dashboard: ${action} failed`);
    return failure(err);
  }
}

const ACTIONS: Record<
  Action,
  (context: ApiContext, id: string, body: Record<string, unknown>) => Promise<ApiResponse>
> = {
  async show(context, id) {
    const message = await showQuarantined(context.pool, id, { schema: context.schema });
    if (!message) throw new QuarantineNotFoundError(id);
    // Always masked: whoever needs the personal data reads it with `converge dlq show --show-sensitive`.
    return { status: 200, body: displayQuarantined(message) };
  },

  async replay(context, id, body) {
    if (context.amqpUrl === undefined)
      return { status: 409, body: { error: 'replay needs a broker: start the dashboard with amqpUrl' } };
    // No queue named: the library sends it to the queue the row's consumer reads.
    const queue = typeof body.queue === 'string' && body.queue.trim() !== '' ? { queue: body.queue } : {};
    const note = typeof body.note === 'string' && body.note.trim() !== '' ? { note: body.note } : {};
    const transport = new RabbitMqTransport({ urls: context.amqpUrl, logger: context.logger });
    const replayed = await withConnection(transport, 'converge-dashboard replay', async (connection) => {
      const publisher = await connection.openPublisher();
      const receipt = await replayQuarantined(context.pool, publisher, {
        id,
        schema: context.schema,
        ...queue,
        ...note,
      });
      const { omittedHeaders, omittedProperties } = receipt;
      return { status: 200, body: { replayed: id, queue: receipt.queue, omittedHeaders, omittedProperties } };
    });
    await context.sampler.refresh();
    return replayed;
  },

  async discard(context, id, body) {
    const reason = typeof body.reason === 'string' ? body.reason : '';
    await discardQuarantined(context.pool, { id, reason, schema: context.schema });
    await context.sampler.refresh();
    return { status: 200, body: { discarded: id } };
  },
};

/** converge's own messages are safe to show; anything else is named by class and code only. */
function failure(err: unknown): ApiResponse {
  if (err instanceof ConfigError) return { status: 400, body: { error: err.message, code: err.code } };
  if (err instanceof QuarantineNotFoundError) return { status: 404, body: { error: err.message, code: err.code } };
  if (err instanceof QuarantineResolvedError) return { status: 409, body: { error: err.message, code: err.code } };
  const described = describeError(err);
  const status = err instanceof ConvergeError ? 502 : 500;
  return { status, body: { error: described.err, ...(described.code ? { code: described.code } : {}) } };
}
