import { z } from 'zod';
import type { WatchedQueue } from '../ops/index.js';

import { silentLogger } from '../runtime/logger.js';
import {
  amqpUrlOption,
  defineOptions,
  loggerOption,
  poolOption,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../runtime/options.js';

/** A queue spec, checked in full by readPipelineStatus's own schema when the dashboard starts. */
const watchedQueues = z.array(
  z
    .custom<WatchedQueue>((v) => typeof v === 'object' && v !== null, 'must be a queue spec')
    .meta({
      typeName: 'WatchedQueue',
    }),
);

export const dashboardOptions = defineOptions(
  'startDashboard',
  z.strictObject({
    pool: poolOption.describe('pg.Pool the dashboard reads and resolves through; the caller keeps ownership.'),
    schema: schemaOption,
    amqpUrl: amqpUrlOption.describe(
      "RabbitMQ URL (or a cluster's node URLs): needed for queue depths and to replay quarantined messages.",
    ),
    queues: watchedQueues
      .default([])
      .describe('Queues whose depth and consumer are shown, as in readPipelineStatus; needs amqpUrl.'),
    host: z
      .string()
      .min(1)
      .default('127.0.0.1')
      .describe('Address to bind. Requests must name it (or localhost) in their Host header.'),
    port: z.number().int().min(0).max(65_535).describe('Port to listen on (0 picks a free one).'),
    token: z
      .string()
      .min(16)
      .max(512)
      .optional()
      .describe(
        'Secret that actions (show payload, replay, discard) must send; a random one is generated when omitted. It is part of the returned url.',
      ),
    logger: loggerOption.default(silentLogger).meta({
      description: 'Where to log requests and actions (never payloads); silent unless given.',
      defaultText: 'silent',
    }),
    sampleIntervalMs: z
      .number()
      .int()
      .min(100)
      .default(2_000)
      .describe('How often the pipeline is sampled for the page and the charts, in ms.'),
    historyMs: z
      .number()
      .int()
      .min(1_000)
      .max(86_400_000)
      .default(600_000)
      .describe('How far back the charts reach, in ms (the ring buffer holds historyMs / sampleIntervalMs samples).'),
    sampleMs: z
      .number()
      .int()
      .min(0)
      .default(1_000)
      .describe('Gap between the two reads each sample computes rates from, in ms (as in readPipelineStatus).'),
    windowMs: z.number().int().min(1).default(60_000).describe('Window for lag percentiles, in ms.'),
    stallAfterMs: z
      .number()
      .int()
      .min(0)
      .default(30_000)
      .describe('A pending event or a missing version older than this counts as a stall, in ms.'),
  }),
);

export type DashboardOptions = OptionsInput<typeof dashboardOptions>;
export type ResolvedDashboardOptions = OptionsOutput<typeof dashboardOptions>;
