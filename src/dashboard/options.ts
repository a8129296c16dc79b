import { z } from 'zod';
import { samplingFields } from '../ops/pipeline-options.js';
import { listenShape, silentLoggerOption } from '../runtime/option-fields.js';

import {
  amqpUrlOption,
  defineOptions,
  poolOption,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../runtime/options.js';

export const dashboardOptions = defineOptions(
  'startDashboard',
  z.strictObject({
    pool: poolOption.describe('pg.Pool the dashboard reads and resolves through; the caller keeps ownership.'),
    schema: schemaOption,
    amqpUrl: amqpUrlOption.describe(
      "RabbitMQ URL (or a cluster's node URLs): needed for queue depths and to replay quarantined messages.",
    ),
    queues: samplingFields.queues.describe(
      'Queues whose depth and consumer are shown, as in readPipelineStatus; needs amqpUrl.',
    ),
    host: listenShape.host.describe('Address to bind. Requests must name it (or localhost) in their Host header.'),
    port: listenShape.port,
    token: z
      .string()
      .min(16)
      .max(512)
      .optional()
      .describe(
        'Secret that actions (show payload, replay, discard) must send; a random one is generated when omitted. It is part of the returned url.',
      ),
    logger: silentLoggerOption.meta({
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
    sampleMs: samplingFields.sampleMs
      .default(1_000)
      .describe('Gap between the two reads each sample computes rates from, in ms (as in readPipelineStatus).'),
    windowMs: samplingFields.windowMs.describe('Window for lag percentiles, in ms.'),
    stallAfterMs: samplingFields.stallAfterMs,
  }),
);

export type DashboardOptions = OptionsInput<typeof dashboardOptions>;
export type ResolvedDashboardOptions = OptionsOutput<typeof dashboardOptions>;
