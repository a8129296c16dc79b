/**
 * `converge-events/errors`: every error class converge throws, each with a stable `code`
 * (docs/reference/errors.md). Catch by class (`err instanceof VersionGapError`) or by code
 * (`err instanceof ConvergeError && err.code === 'CONVERGE_VERSION_GAP'`).
 */
export {
  ConvergeError,
  ConfigError,
  InvalidIdentifierError,
  EnvelopeValidationError,
  MalformedBodyError,
  BodyTooLargeError,
  ConcurrencyConflictError,
  ContentConflictError,
  VersionGapError,
  StaleVersionError,
  PublishError,
  SchemaTooNewError,
  PermanentError,
  TransientError,
  UnsupportedSchemaVersionError,
  IncompatibleSchemaVersionError,
  QuarantineNotFoundError,
  QuarantineResolvedError,
  BrokerPluginMissingError,
  PayloadValidationError,
  NoRowsWrittenError,
  ConnectionConfigError,
  ServiceUnavailableError,
  CommitRolledBackError,
  SchemaNotMigratedError,
  WalLevelNotLogicalError,
  ReadyTimeoutError,
  AdapterError,
  FreshnessTimeoutError,
} from './runtime/errors.js';
export type { AggregateKey, ConfigProblem, ConvergeErrorCode, PublishFailure, WrittenFor } from './runtime/errors.js';
export type { ConnectionFailure, ConnectionFailureKind, ConnectionService } from './runtime/errors.js';
