import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { DEFAULT_BACKOFF } from '../../runtime/backoff.js';
import {
  amqpUrlOption,
  amqpUrlRequired,
  backoffOption,
  brokerUrls,
  connectionRequired,
  connectionShape,
  defineOptions,
  functionOption,
  identifierOption,
  loggerOption,
  requireConnection,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../../runtime/options.js';
import { silentLogger } from '../../runtime/logger.js';
import { routingKeyOption } from '../options.js';
import { DEFAULT_CONFIRM_TIMEOUT_MS, DEFAULT_EXCHANGE, DEFAULT_RECONNECT_BACKOFF } from '../../runtime/defaults.js';
import { amqpSocketOptionsOption } from '../../transport/transport-option.js';

/** Slot and publication a CDC relay uses unless told otherwise. */
export const DEFAULT_CDC_SLOT = 'converge_cdc';

export const cdcRelayOptions = defineOptions(
  'CdcRelay',
  z
    .strictObject({
      ...connectionShape,
      amqpUrl: amqpUrlOption.describe("RabbitMQ URL, or a cluster's node URLs to fail over between (required)."),
      amqpSocketOptions: amqpSocketOptionsOption.describe(
        'Socket options for amqplib, as for the polling relay. Never logged.',
      ),
      schema: schemaOption,
      exchange: z
        .string()
        .min(1)
        .max(255)
        .default(DEFAULT_EXCHANGE)
        .describe('Topic exchange events are published to.'),
      declareExchange: z.boolean().default(true).describe('Declare the exchange (durable topic) on every new channel.'),
      routingKey: routingKeyOption.describe(
        'Template with {aggregateType} {eventType} {kind} {tenantId} {schemaVersion}, or a function of the envelope.',
      ),
      slot: identifierOption
        .default(DEFAULT_CDC_SLOT)
        .describe('Logical replication slot (pgoutput) the relay reads; one relay at a time may use it.'),
      publication: identifierOption
        .default(DEFAULT_CDC_SLOT)
        .describe("Publication of the outbox table's inserts the slot is read through."),
      createSlot: z
        .boolean()
        .default(true)
        .describe(
          'Create the publication and slot when missing (needs the REPLICATION attribute or superuser); else they must exist.',
        ),
      relayId: z
        .string()
        .min(1)
        .max(200)
        .default(() => `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`)
        .meta({ description: 'Identity shown as application_name and in logs.', defaultText: 'host:pid:random' }),
      maxInFlight: z
        .number()
        .int()
        .min(1)
        .max(100_000)
        .default(1_000)
        .describe('Events published and not yet confirmed at most; the replication stream pauses at this bound.'),
      confirmTimeoutMs: z
        .number()
        .int()
        .min(1)
        .default(DEFAULT_CONFIRM_TIMEOUT_MS)
        .describe('How long to wait for a broker confirm before stopping the stream and retrying, in ms.'),
      markIntervalMs: z
        .number()
        .int()
        .min(1)
        .default(100)
        .describe(
          'How often confirmed events are marked published and the slot acknowledged, in ms (the mark lags the publish by about this).',
        ),
      statusIntervalMs: z
        .number()
        .int()
        .min(100)
        .default(10_000)
        .describe(
          "Standby status (keepalive) interval towards PostgreSQL, in ms; below the server's wal_sender_timeout.",
        ),
      standbyRetryMs: z
        .number()
        .int()
        .min(10)
        .default(1_000)
        .describe('While another relay holds the slot, how often to try to take it over, in ms.'),
      backoff: backoffOption(DEFAULT_BACKOFF).describe(
        'Delay schedule for restarting the stream after the broker did not take an event.',
      ),
      reconnectBackoff: backoffOption(DEFAULT_RECONNECT_BACKOFF).describe(
        'Delay schedule for reconnecting to RabbitMQ / PostgreSQL after losing them.',
      ),
      logger: loggerOption
        .default(silentLogger)
        .meta({ description: 'Where to log; silent unless given.', defaultText: 'silent' }),
      handleSignals: z.boolean().default(false).describe('Stop gracefully on SIGTERM and SIGINT.'),
      hooks: z
        .strictObject({
          beforeAcknowledge: functionOption<(eventIds: readonly string[]) => void>('(eventIds) => void')
            .optional()
            .describe(
              'When confirmed events are about to be marked published and their position acknowledged (fault injection: throwing or exiting there is a crash in that window).',
            ),
          afterIncompleteMark: functionOption<() => Promise<void>>('() => Promise<void>')
            .optional()
            .describe(
              'After a mark missed rows not yet visible to it, before they are looked at again (fault injection: a commit can become visible in between).',
            ),
        })
        .default({})
        .describe('Fault-injection hooks.'),
    })
    .refine(requireConnection, connectionRequired())
    .refine((o) => o.amqpUrl !== undefined, amqpUrlRequired())
    .transform((o) => ({ ...o, amqpUrl: brokerUrls(o.amqpUrl!) })),
);

export type CdcRelayOptions = OptionsInput<typeof cdcRelayOptions>;
export type ResolvedCdcRelayOptions = OptionsOutput<typeof cdcRelayOptions>;

export function resolveCdcRelayOptions(input: CdcRelayOptions): ResolvedCdcRelayOptions {
  return cdcRelayOptions.parse(input);
}
