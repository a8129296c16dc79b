import { z } from 'zod';
import {
  aggregateTypeOption,
  inboxScopeOption,
  lagBudgetsOption,
  projectionNameOption,
} from '../runtime/option-fields.js';

import {
  amqpUrlOption,
  amqpUrlRequired,
  defineOptions,
  identifierOption,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../runtime/options.js';

const sourceTable = z.strictObject({
  table: z
    .string()
    .refine(
      (t) => t.split('.').length <= 2 && t.split('.').every((part) => identifierOption.safeParse(part).success),
      'table or schema.table, plain lower-case identifiers',
    )
    .describe('`table` or `schema.table`, plain lower-case identifiers.'),
  aggregateType: aggregateTypeOption.describe('Aggregate type of the outbox events whose version each row must match.'),
  idColumn: identifierOption.default('id').describe('Column holding the aggregate id.'),
  versionColumn: identifierOption.default('version').describe('Column holding the aggregate version.'),
  changedAtColumn: identifierOption
    .optional()
    .describe(
      'Timestamp column set on every change; with it only rows changed within sourceLookbackMs are checked (cheap, and valid after outbox cleanup).',
    ),
});

const watchedQueue = z.strictObject({
  queue: z.string().min(1).max(255).describe('Queue name.'),
  consumer: inboxScopeOption.optional().describe('Inbox scope of the consumer reading it; the queue name by default.'),
  projection: projectionNameOption.optional().describe('A projection (in projection_state) that this consumer writes.'),
});

/** A business table whose rows carry the aggregate version their outbox events must match. */
export type SourceTable = z.input<typeof sourceTable>;
/** A queue and the inbox scope (and optionally the projection) of the consumer that reads it. */
export type WatchedQueue = z.input<typeof watchedQueue>;
export type ResolvedSourceTable = z.output<typeof sourceTable>;

/** How the pipeline is sampled: shared by readPipelineStatus and the dashboard, which samples through it. */
export const samplingFields = {
  queues: z.array(watchedQueue).default([]),
  windowMs: z.number().int().min(1).default(60_000),
  sampleMs: z.number().int().min(0),
  stallAfterMs: z
    .number()
    .int()
    .min(0)
    .default(30_000)
    .describe('A pending event or a missing version older than this counts as a stall, in ms.'),
};

export const pipelineStatusOptions = defineOptions(
  'readPipelineStatus',
  z
    .strictObject({
      schema: schemaOption,
      sources: z
        .array(sourceTable)
        .default([])
        .describe(
          'Business tables whose row versions are compared with the outbox (a source ahead of its events is a finding).',
        ),
      queues: samplingFields.queues.describe('Queues whose depth, rates and consumer lag are reported; needs amqpUrl.'),
      amqpUrl: amqpUrlOption.describe(
        "RabbitMQ URL (or a cluster's node URLs), needed to read queue depths when queues are given.",
      ),
      windowMs: samplingFields.windowMs.describe('Window for lag percentiles and projection activity, in ms.'),
      sampleMs: samplingFields.sampleMs
        .default(0)
        .describe(
          'Gap between the two samples rates and drain times are computed from, in ms; 0 reads once, at once, without rates (findings that need a rate are then not judged).',
        ),
      stallAfterMs: samplingFields.stallAfterMs,
      lagBudgets: lagBudgetsOption.describe(
        'Acceptable end-to-end lag (occurredAt → inbox row) in ms, by projection (one a watched queue names) or inbox scope: a p99 over it in the window is a lag-over-budget warning.',
      ),
      cdcSlots: z
        .array(identifierOption)
        .default([])
        .describe(
          "CDC relays' replication slots to check: whether one exists, whether a relay streams from it, the WAL it retains.",
        ),
      cdcRetainedWalWarnBytes: z
        .number()
        .int()
        .min(0)
        .default(1024 ** 3)
        .describe('A slot retaining this much WAL or more is a warning even while a relay streams from it, in bytes.'),
      horizonWarnAfterMs: z
        .number()
        .int()
        .min(0)
        .default(300_000)
        .describe(
          "A transaction, prepared transaction or inactive replication slot holding back vacuum's xmin horizon this long is a warning, in ms.",
        ),
      sourceLookbackMs: z
        .number()
        .int()
        .min(1)
        .default(3_600_000)
        .describe(
          'With changedAtColumn: how far back source rows are checked, in ms (keep it below the outbox retention).',
        ),
    })
    .refine(
      // Runs even when other fields failed, so `queues` may not be an array here.
      (o) => !Array.isArray(o.queues) || o.queues.length === 0 || o.amqpUrl !== undefined,
      amqpUrlRequired('amqpUrl is required to read queue depths'),
    ),
);

export type PipelineStatusOptions = OptionsInput<typeof pipelineStatusOptions>;
export type ResolvedPipelineStatusOptions = OptionsOutput<typeof pipelineStatusOptions>;
