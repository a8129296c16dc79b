/**
 * Option fields several components share, each declared once here: the component specs compose
 * them (a component may word the description for its own use, make one optional or default it its
 * own way; test/unit/option-declarations.test.ts fails on a second declaration of a shared name).
 */
import { z } from 'zod';
import { DEFAULT_RECONNECT_BACKOFF, DEFAULT_SCHEMA } from './defaults.js';
import { silentLogger } from './logger.js';
import { backoffOption, loggerOption } from './options.js';

/** The long-running engines (relays, consumer): stop gracefully on SIGTERM and SIGINT. */
export const handleSignalsOption = z.boolean().default(false).describe('Stop gracefully on SIGTERM and SIGINT.');

/** The long-running engines: how they come back after losing PostgreSQL or RabbitMQ. */
export const reconnectBackoffOption = backoffOption(DEFAULT_RECONNECT_BACKOFF).describe(
  'Delay schedule for reconnecting to RabbitMQ / PostgreSQL after losing them.',
);

/** Where a component logs; the library prints nothing unless given one. */
export const silentLoggerOption = loggerOption
  .default(silentLogger)
  .meta({ description: 'Where to log; silent unless given.', defaultText: 'silent' });

/** An inbox scope: the consumer name deduplication, parking and quarantine are kept per. */
export const inboxScopeOption = z.string().min(1).max(200);

/** A projection's name, as the consumer applies it (projection_state.projection). */
export const projectionNameOption = z.string().min(1);

/** An aggregate type, as events carry it. */
export const aggregateTypeOption = z.string().min(1);

/** Acceptable end-to-end lag in ms, by inbox scope (or projection where the component says so). */
export const lagBudgetsOption = z.record(z.string().min(1), z.number().int().min(1)).default({});

/** When an aggregate's oldest parked event waited this long, it counts as a gap. */
export const gapAfterMsOption = z.number().int().min(1);

/** An HTTP endpoint's address and port (metrics, dashboard). */
export const listenShape = {
  host: z.string().min(1).default('127.0.0.1').describe('Address to bind.'),
  port: z.number().int().min(0).max(65_535).describe('Port to listen on (0 picks a free one).'),
};

/**
 * `schema` where an invalid name must still throw InvalidIdentifierError (appendToOutbox, migrate):
 * a plain string, checked by schemaRef() where it is used. Every other component takes schemaOption.
 */
export const schemaNameOption = z.string().default(DEFAULT_SCHEMA);
