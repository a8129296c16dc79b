export type { EventEnvelope, EventKind, NewEvent } from './envelope/envelope.js';
export { fingerprint, canonicalJson } from './envelope/fingerprint.js';
export { validateEnvelope, parseEnvelope, DEFAULT_MAX_ENVELOPE_BYTES } from './envelope/validate.js';
export { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY, HEADER, CONTENT_TYPE } from './transport/wire.js';
export type { EncodedMessage, RoutingKeyFn } from './transport/wire.js';

export type { Executor, QueryResultLike } from './db/executor.js';
export { quoteIdentifier } from './db/identifier.js';
export { withTransaction } from './db/transaction.js';

export { migrate, migrationSql, DEFAULT_SCHEMA } from './schema/migrate.js';
export type { MigrateOptions, MigrateResult } from './schema/migrate.js';

export { appendToOutbox, updateExactlyOne } from './outbox/append.js';
export type { AppendedEvent, OutboxOptions } from './outbox/append.js';

export { backoffDelay, DEFAULT_BACKOFF } from './ops/backoff.js';
export type { BackoffPolicy } from './ops/backoff.js';
export { createLogger, silentLogger } from './ops/logger.js';
export type { Logger } from './ops/logger.js';

export {
  ConvergeError,
  ConfigError,
  InvalidIdentifierError,
  EnvelopeValidationError,
  ConcurrencyConflictError,
  ContentConflictError,
  VersionGapError,
  StaleVersionError,
  PublishError,
  SchemaTooNewError,
} from './errors.js';
export type { AggregateKey, PublishFailure } from './errors.js';
