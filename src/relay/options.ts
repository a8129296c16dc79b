import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { DEFAULT_BACKOFF } from '../runtime/backoff.js';
import { ConfigError } from '../runtime/errors.js';
import {
  backoffOption,
  connectionRequired,
  connectionShape,
  defineOptions,
  functionOption,
  amqpUrlOption,
  amqpUrlRequired,
  brokerRequired,
  brokerUrls,
  requireConnection,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
  faultHooksOption,
  hookOption,
  poolModeOption,
} from '../runtime/options.js';

import { DEFAULT_ROUTING_KEY, routingKeyFromTemplate, type RoutingKeyFn } from '../transport/wire.js';
import { DEFAULT_CONFIRM_TIMEOUT_MS, DEFAULT_MAX_ATTEMPTS } from '../runtime/defaults.js';
import { amqpSocketOptionsOption, exchangeOption, transportOption } from '../transport/transport-option.js';
import { handleSignalsOption, reconnectBackoffOption, silentLoggerOption } from '../runtime/option-fields.js';

export interface RelayHooks {
  /**
   * Called after the broker confirmed a batch and before it is marked published. Throwing
   * here behaves like a crash in that window: nothing is marked, the claims stay until their
   * lease expires and the events are published again (a duplicate, never a loss). Meant for
   * fault-injection tests and labs.
   */
  afterConfirm?: (eventIds: string[]) => void | Promise<void>;
}

const relayHooksOption = faultHooksOption({
  afterConfirm: hookOption<NonNullable<RelayHooks['afterConfirm']>>(
    '(eventIds) => void | Promise<void>',
    'After the broker confirmed a batch, before it is marked published (fault injection).',
  ),
});

/**
 * A template is checked when the options are parsed, so a bad placeholder is one more listed problem.
 * The CDC relay declares its routingKey with this too.
 */
export const routingKeyOption = z
  .union([z.string().min(1), functionOption<RoutingKeyFn>('(envelope) => string')])
  .default(DEFAULT_ROUTING_KEY)
  .transform((value, ctx): RoutingKeyFn => {
    if (typeof value === 'function') return value;
    try {
      return routingKeyFromTemplate(value);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      ctx.issues.push({ code: 'custom', message: err.problems[0]?.message ?? 'invalid', input: value });
      return z.NEVER;
    }
  });

/**
 * The fields both relays take, polling and CDC: one declaration, spread into each spec. The CDC
 * relay reads its rows from a slot instead of claiming them; everything about the broker, the
 * routing, the identity and the shell is the same.
 */
export const publisherShape = {
  ...connectionShape,
  amqpUrl: amqpUrlOption.describe(
    "RabbitMQ URL, or a cluster's node URLs to fail over between (required unless transport is given).",
  ),
  transport: transportOption.describe(
    'The broker to publish to instead of RabbitMQ at amqpUrl, e.g. createInProcessTransport() for development and tests (docs/transports.md). amqpUrl and amqpSocketOptions are then not used.',
  ),
  amqpSocketOptions: amqpSocketOptionsOption,
  schema: schemaOption,
  exchange: exchangeOption.describe('Topic exchange events are published to.'),
  declareExchange: z.boolean().default(true).describe('Declare the exchange (durable topic) on every new channel.'),
  routingKey: routingKeyOption.describe(
    'Template with {aggregateType} {eventType} {kind} {tenantId} {schemaVersion}, or a function of the envelope.',
  ),
  relayId: z
    .string()
    .min(1)
    .max(200)
    .default(() => `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`)
    .meta({
      description: 'Identity of this relay: written into claimed_by, shown as application_name and in logs.',
      defaultText: 'host:pid:random',
    }),
  confirmTimeoutMs: z
    .number()
    .int()
    .min(1)
    .default(DEFAULT_CONFIRM_TIMEOUT_MS)
    .describe(
      'How long to wait for a broker confirm before the publish counts as failed, in ms (the CDC relay then restarts its stream); the clock stands still while the broker blocks the connection (resource alarm).',
    ),
  standbyRetryMs: z
    .number()
    .int()
    .min(10)
    .default(1_000)
    .describe(
      'How often a standby tries to take over, in ms: the relay lock with claim exclusive, the slot for the CDC relay.',
    ),
  backoff: backoffOption(DEFAULT_BACKOFF).describe(
    'Retry schedule for an event the broker did not take (the CDC relay restarts its stream after it).',
  ),
  reconnectBackoff: reconnectBackoffOption,
  logger: silentLoggerOption,
  handleSignals: handleSignalsOption,
};

export const relayOptions = defineOptions(
  'Relay',
  z
    .strictObject({
      ...publisherShape,
      poolMode: poolModeOption,
      directConnectionString: z
        .string()
        .min(1)
        .optional()
        .describe(
          "A URL of PostgreSQL itself, not of a transaction-mode pooler, for what needs a session: LISTEN and claim exclusive's lock (at most 2 connections). With poolMode transaction and without it the relay polls every pollIntervalMs, and claim exclusive is refused.",
        ),
      batchSize: z.number().int().min(1).max(10_000).default(500).describe('Rows claimed per cycle.'),
      concurrency: z
        .number()
        .int()
        .min(1)
        .max(16)
        .default(2)
        .describe('Batches that may wait for their confirms at once; per-aggregate order still holds.'),
      listen: z
        .boolean()
        .default(true)
        .describe(
          'Wake up on NOTIFY from outbox inserts instead of waiting for the next poll (on directConnectionString when given; with poolMode transaction only there).',
        ),
      claim: z
        .enum(['lease', 'exclusive'])
        .default('lease')
        .describe(
          'How rows are claimed. lease: any number of relays share the outbox, each claim written into the row with a lease. exclusive: one relay per schema publishes, holding a session advisory lock, and claims by reading (one row write per event instead of two); others wait as standbys and take over when its connection ends (docs/relay.md).',
        ),
      leaseMs: z
        .number()
        .int()
        .min(100)
        .default(30_000)
        .describe(
          "How long a claim protects rows from other relays, in ms; with claim exclusive, how long the lock's session may sit idle (PostgreSQL's idle_session_timeout) before the server ends it and a standby takes over.",
        ),
      pollIntervalMs: z
        .number()
        .int()
        .min(1)
        .default(250)
        .describe('Sleep after an empty claim, in ms; with listen a NOTIFY cuts it short.'),
      maxAttempts: z
        .number()
        .int()
        .min(1)
        .default(DEFAULT_MAX_ATTEMPTS)
        .describe(
          'Returns (unroutable publishes) after which an event is marked failed (kept, never deleted); nacks and lost confirms never fail it.',
        ),
      hooks: relayHooksOption,
    })
    .refine(requireConnection, connectionRequired())
    .refine(brokerRequired, amqpUrlRequired())
    // A session advisory lock taken through a transaction-mode pooler stays on a server connection other clients get next.
    .refine((o) => o.claim !== 'exclusive' || o.poolMode !== 'transaction' || o.directConnectionString !== undefined, {
      message:
        'claim exclusive holds a session advisory lock, which a transaction-mode pooler cannot keep: give directConnectionString or use claim lease',
      path: ['claim'],
      when: () => true,
    })
    // An exclusive relay's lock session is idle at most a poll or a confirm wait; longer means it is gone.
    .refine((o) => o.claim !== 'exclusive' || o.leaseMs > Math.max(o.pollIntervalMs, o.confirmTimeoutMs), {
      message: 'with claim exclusive, leaseMs must exceed pollIntervalMs and confirmTimeoutMs',
      path: ['leaseMs'],
      when: () => true,
    })
    .transform((o) => ({ ...o, amqpUrl: o.amqpUrl === undefined ? undefined : brokerUrls(o.amqpUrl) })),
);

export type RelayOptions = OptionsInput<typeof relayOptions>;
export type ResolvedRelayOptions = OptionsOutput<typeof relayOptions>;

export function resolveRelayOptions(input: RelayOptions): ResolvedRelayOptions {
  return relayOptions.parse(input);
}
