import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { DEFAULT_BACKOFF, type BackoffPolicy } from '../runtime/backoff.js';
import { amqpUrlFromEnv, backoffOption, databaseUrlFromEnv, identifierOption, parseOptions } from '../runtime/options.js';
import type { Logger } from '../runtime/logger.js';
import { createLogger } from '../runtime/logger.js';
import { DEFAULT_ROUTING_KEY, routingKeyFromTemplate, type RoutingKeyFn } from '../transport/wire.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import type { AmqpSocketOptions } from '../transport/connection.js';

export interface RelayHooks {
  /**
   * Called after the broker confirmed a batch and before it is marked published. Throwing
   * here behaves like a crash in that window: nothing is marked, the claims stay until their
   * lease expires and the events are published again (a duplicate, never a loss). Meant for
   * fault-injection tests and labs.
   */
  afterConfirm?: (eventIds: string[]) => void | Promise<void>;
}

export interface RelayOptions {
  /** Pool to claim and mark with; otherwise one is created from `connectionString` (default DATABASE_URL). */
  pool?: pg.Pool;
  connectionString?: string;
  /** Default AMQP_URL, or amqp://guest:guest@127.0.0.1:5672. */
  amqpUrl?: string;
  /**
   * Socket options for amqplib's connect: with an `amqps://` URL they go to `tls.connect`
   * (`ca`, `cert`, `key`, `passphrase`, `servername`, `rejectUnauthorized`), and `credentials`
   * can select EXTERNAL auth. Never logged.
   */
  amqpSocketOptions?: AmqpSocketOptions;
  /** Schema holding converge's tables. Default `converge`. */
  schema?: string;
  /** Topic exchange events are published to. Default `converge.events`. */
  exchange?: string;
  /** Declare the exchange (durable topic) on every new channel. Default true. */
  declareExchange?: boolean;
  /** Template with {aggregateType} {eventType} {kind} {tenantId} {schemaVersion}, or a function. Default `{aggregateType}.{eventType}`. */
  routingKey?: string | RoutingKeyFn;
  /** Identity written into `claimed_by`. Default host:pid:random. */
  relayId?: string;
  /** Rows claimed per cycle. Default 500. */
  batchSize?: number;
  /**
   * Batches that may wait for their confirms at once: as soon as one batch is sent, the next
   * is claimed. Per-aggregate order still holds: a claimed event keeps later versions of its
   * aggregate out of every other claim until it is published. Default 4.
   */
  concurrency?: number;
  /** Wake up on NOTIFY from outbox inserts (migration 2) instead of waiting for the next poll. Default true. */
  listen?: boolean;
  /** How long a claim protects rows from other relays, in ms. Default 30000. */
  leaseMs?: number;
  /** Sleep after an empty claim, in ms; with `listen` a NOTIFY cuts it short. Default 250. */
  pollIntervalMs?: number;
  /** How long to wait for a broker confirm before treating the publish as failed, in ms. Default 10000. */
  confirmTimeoutMs?: number;
  /** Attempts after which an event is marked `failed` (kept, never deleted). Default 10. */
  maxAttempts?: number;
  /** Retry schedule for events the broker did not take. */
  backoff?: Partial<BackoffPolicy>;
  /** Delay schedule for reconnecting to RabbitMQ / PostgreSQL after losing them. */
  reconnectBackoff?: Partial<BackoffPolicy>;
  logger?: Logger;
  /** Stop gracefully on SIGTERM and SIGINT. Default false (the CLI turns it on). */
  handleSignals?: boolean;
  hooks?: RelayHooks;
}

const relaySchema = z.object({
  pool: z.any().optional(),
  connectionString: z.string().min(1).optional(),
  amqpUrl: z.string().min(1).optional(),
  amqpSocketOptions: z.record(z.string(), z.unknown()).optional(),
  schema: identifierOption.optional(),
  exchange: z.string().min(1).max(255).optional(),
  declareExchange: z.boolean().optional(),
  routingKey: z.union([z.string().min(1), z.function()]).optional(),
  relayId: z.string().min(1).max(200).optional(),
  batchSize: z.number().int().min(1).max(10_000).optional(),
  concurrency: z.number().int().min(1).max(16).optional(),
  listen: z.boolean().optional(),
  leaseMs: z.number().int().min(100).optional(),
  pollIntervalMs: z.number().int().min(1).optional(),
  confirmTimeoutMs: z.number().int().min(1).optional(),
  maxAttempts: z.number().int().min(1).optional(),
  backoff: backoffOption,
  reconnectBackoff: backoffOption,
  logger: z.any().optional(),
  handleSignals: z.boolean().optional(),
  hooks: z.any().optional(),
});

export interface ResolvedRelayOptions {
  pool?: pg.Pool;
  connectionString: string;
  amqpUrl: string;
  amqpSocketOptions: AmqpSocketOptions;
  schema: string;
  exchange: string;
  declareExchange: boolean;
  routingKey: RoutingKeyFn;
  relayId: string;
  batchSize: number;
  concurrency: number;
  listen: boolean;
  leaseMs: number;
  pollIntervalMs: number;
  confirmTimeoutMs: number;
  maxAttempts: number;
  backoff: BackoffPolicy;
  reconnectBackoff: BackoffPolicy;
  logger: Logger;
  handleSignals: boolean;
  hooks: RelayHooks;
}

export function resolveRelayOptions(input: RelayOptions): ResolvedRelayOptions {
  const o = parseOptions(relaySchema, input) as RelayOptions;
  return {
    pool: o.pool,
    connectionString: o.connectionString ?? databaseUrlFromEnv(),
    amqpUrl: o.amqpUrl ?? amqpUrlFromEnv(),
    amqpSocketOptions: o.amqpSocketOptions ?? {},
    schema: o.schema ?? DEFAULT_SCHEMA,
    exchange: o.exchange ?? 'converge.events',
    declareExchange: o.declareExchange ?? true,
    routingKey: typeof o.routingKey === 'function' ? o.routingKey : routingKeyFromTemplate(o.routingKey ?? DEFAULT_ROUTING_KEY),
    relayId: o.relayId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
    batchSize: o.batchSize ?? 500,
    concurrency: o.concurrency ?? 4,
    listen: o.listen ?? true,
    leaseMs: o.leaseMs ?? 30_000,
    pollIntervalMs: o.pollIntervalMs ?? 250,
    confirmTimeoutMs: o.confirmTimeoutMs ?? 10_000,
    maxAttempts: o.maxAttempts ?? 10,
    backoff: { ...DEFAULT_BACKOFF, ...o.backoff },
    reconnectBackoff: { initialDelayMs: 100, maxDelayMs: 10_000, factor: 2, ...o.reconnectBackoff },
    logger: o.logger ?? createLogger('converge-relay'),
    handleSignals: o.handleSignals ?? false,
    hooks: o.hooks ?? {},
  };
}
