/**
 * The error table: every code a ConvergeError can carry, declared once with the class that carries
 * it, when converge throws it and what to do. `ConvergeErrorCode` is derived from its keys,
 * docs/reference/errors.md is generated from its rows (`npm run docs`), and test/errors.test.ts
 * checks that the classes in errors.ts throw exactly these codes. Its own file only to keep
 * errors.ts short; errors.ts re-exports it.
 */

/** One row of the error table: the class that carries a code, when converge throws it, what to do. */
export interface ErrorCodeDoc {
  /** Name of the ConvergeError subclass that carries the code. */
  readonly error: string;
  /** Properties the error carries besides `code` and `message`. */
  readonly carries?: string;
  readonly when: string;
  readonly action: string;
}

export const ERROR_CODES = {
  CONVERGE_INVALID_CONFIG: {
    error: 'ConfigError',
    carries: '`problems: { path, message }[]`, `field` = the first path',
    when: 'An options object (or a CLI flag) failed validation: unknown key, wrong type, out of range, a retention shorter than the retry horizon. Every problem is listed at once.',
    action: 'Fix the options named in `problems`; for an unknown key the message suggests the closest known name.',
  },
  CONVERGE_INVALID_IDENTIFIER: {
    error: 'InvalidIdentifierError',
    carries: '`identifier`, `field`',
    when: 'A schema, table or role name is not a plain SQL identifier (`/^[a-z_][a-z0-9_]{0,62}$/`). The message never quotes the name.',
    action: 'Use a lower-case name of letters, digits and underscores.',
  },
  CONVERGE_INVALID_ENVELOPE: {
    error: 'EnvelopeValidationError',
    carries: '`field`',
    when: 'An event to append, or a received body, has a field missing or of the wrong type, range or format (also a routing key over 255 bytes). A received one is quarantined as `invalid-envelope`.',
    action:
      'Fix the producer; `field` names the field, never its value. Replay or discard the quarantined copies (`converge dlq`).',
  },
  CONVERGE_MALFORMED_BODY: {
    error: 'MalformedBodyError',
    carries: '`field` = `(body)`; also an `EnvelopeValidationError`',
    when: 'A received body is empty, not UTF-8, not JSON, nested deeper than 64 levels, or JSON but not an object. Quarantined as `malformed-body`.',
    action: 'A broken producer: `converge dlq list --reason malformed-body` finds its messages.',
  },
  CONVERGE_BODY_TOO_LARGE: {
    error: 'BodyTooLargeError',
    carries: '`bytes`, `limit`; also an `EnvelopeValidationError`',
    when: "A received body is over the consumer's `maxEnvelopeBytes`. Quarantined as `body-too-large` without being parsed.",
    action: "Make the event smaller at the producer, or raise the consumer's `maxEnvelopeBytes`; then replay it.",
  },
  CONVERGE_CONCURRENT_UPDATE: {
    error: 'ConcurrencyConflictError',
    carries: '`rowCount`',
    when: '`updateExactlyOne` changed a number of rows other than one: another transaction won the race.',
    action: 'Roll back the transaction (business change and outbox row together), read again and retry the command.',
  },
  CONVERGE_COMMIT_ROLLED_BACK: {
    error: 'CommitRolledBackError',
    when: 'PostgreSQL answered a COMMIT converge ran with ROLLBACK: a statement in the transaction failed and its error was caught (by a handler, a repair or rebuild callback, the work given to `withTransaction`), so the transaction was aborted and nothing was written. The consumer treats it as a handler error: rolled back, retried with backoff, quarantined (`handler-failed`) after `maxAttempts`, never acked as applied; `withTransaction`, repair, rebuild and migrate reject with it.',
    action:
      'Do not catch an SQL error and carry on in the same transaction: let it propagate, write `INSERT ... ON CONFLICT` for a duplicate that is meant to be ignored, or run the statement that may fail inside a SAVEPOINT (`SAVEPOINT s` ... `ROLLBACK TO SAVEPOINT s`).',
  },
  CONVERGE_CONTENT_CONFLICT: {
    error: 'ContentConflictError',
    carries: '`consumer`, `eventId`, `storedFingerprint`, `receivedFingerprint`',
    when: "An eventId the consumer already recorded arrived with other content. Never applied: quarantined, and reported in the consumer's `conflict` event.",
    action:
      'A producer reused an eventId: decide which copy is right (`converge dlq show`), fix the producer, discard the quarantined copy.',
  },
  CONVERGE_VERSION_GAP: {
    error: 'VersionGapError',
    carries: '`key`, `eventVersion`, `currentVersion`',
    when: '`applyIncrement(s)` got an incremental event whose predecessor is not applied yet. In a consumer the transaction rolls back and the event waits (parked or retried).',
    action:
      'In a handler: let it propagate. A gap that stays open: `converge gaps`, then `repairGaps` or `converge reconcile --repair`.',
  },
  CONVERGE_STALE_VERSION: {
    error: 'StaleVersionError',
    carries: '`key`, `eventVersion`, `currentVersion`',
    when: 'An incremental event with a new eventId claims a version the projection already has (no baseline covers it). Quarantined as `stale-version`: waiting cannot fix it.',
    action:
      'Two events claim one version, a producer bug: inspect with `converge dlq show`, fix the producer, reconcile the aggregate from the source.',
  },
  CONVERGE_PUBLISH_NACKED: {
    error: 'PublishError',
    carries: "`reason` = `'nacked'`",
    when: 'The broker nacked a message. The outbox row stays unpublished (code in `last_error`) and is retried with backoff.',
    action: 'Usually passing (resource alarm, queue length limit); check the broker if it persists.',
  },
  CONVERGE_PUBLISH_RETURNED: {
    error: 'PublishError',
    carries: "`reason` = `'returned'`",
    when: 'The broker returned the message (mandatory): no queue is bound for its routing key. The row stays unpublished and is retried.',
    action:
      'Declare the consumer queue and its bindings (`startConsumer` or `converge topology`); `converge outbox retry` for rows that became `failed`.',
  },
  CONVERGE_PUBLISH_CONFIRM_TIMEOUT: {
    error: 'PublishError',
    carries: "`reason` = `'confirm-timeout'`",
    when: 'No confirm arrived within the confirm timeout. The row stays unpublished and is retried with the same eventId.',
    action: 'Check broker health and the network; a duplicate that did arrive is acked by the inbox without effect.',
  },
  CONVERGE_PUBLISH_CHANNEL_CLOSED: {
    error: 'PublishError',
    carries: "`reason` = `'channel-closed'`",
    when: 'The confirm channel closed before the confirm. The relay reconnects and retries the row.',
    action: 'If it repeats, the broker log says why the channel closed (exchange missing, permissions, restart).',
  },
  CONVERGE_PUBLISH_UNENCODABLE: {
    error: 'PublishError',
    carries: "`reason` = `'unencodable'`",
    when: 'The outbox row cannot become a valid message (e.g. its routing key is over 255 bytes). Retrying cannot help, so the row is marked `failed` at once. Also a retry copy or replay that amqplib still refuses to encode, although its headers and properties are made encodable first (docs/consumer.md#headers-and-properties-converge-publishes-again): the consumer then quarantines the delivery as `unencodable-copy` instead of requeueing it.',
    action: 'Fix the row or the routing-key template, then `converge outbox retry`.',
  },
  CONVERGE_SCHEMA_TOO_NEW: {
    error: 'SchemaTooNewError',
    carries: '`databaseVersion`, `knownVersion`',
    when: '`migrate` found migrations newer than this version of converge knows: a newer converge migrated the database.',
    action: 'Upgrade converge in this service; never downgrade a migrated database.',
  },
  CONVERGE_PERMANENT: {
    error: 'PermanentError',
    when: 'Thrown by your handler when retrying cannot help. The delivery is quarantined at once as `handler-permanent`, the message kept in the row.',
    action: 'Fix the data or the handler, then `converge dlq replay` (or discard).',
  },
  CONVERGE_TRANSIENT: {
    error: 'TransientError',
    when: 'Thrown by your handler when waiting helps (a dependency is down). The delivery is retried with backoff, without the `maxAttempts` limit.',
    action: 'Bring the dependency back; the delivery retries by itself.',
  },
  CONVERGE_UNSUPPORTED_SCHEMA_VERSION: {
    error: 'UnsupportedSchemaVersionError',
    carries: '`eventType`, `schemaVersion`, `currentVersion`',
    when: "An event's `schemaVersion` is newer than the consumer's `schemas[type].current`, or no upcaster bridges it. Quarantined as `unsupported-schema-version` with the original body.",
    action: 'Deploy a consumer that knows the version (or add the upcaster), then `converge dlq replay`.',
  },
  CONVERGE_INCOMPATIBLE_SCHEMA_VERSION: {
    error: 'IncompatibleSchemaVersionError',
    carries: '`eventType`, `schemaVersion`, `consumers` (the live consumers that do not read it)',
    when: "The producer's compat guard (`createCompatGuard`) refused an event: a live consumer in the schema registry does not read its `schemaVersion`. Nothing was appended.",
    action:
      'Roll the named consumers out first with support for the version (`schemas` entry, upcasters), check with `converge compat`, then write it.',
  },
  CONVERGE_QUARANTINE_NOT_FOUND: {
    error: 'QuarantineNotFoundError',
    carries: '`id`',
    when: 'A quarantine replay, discard or `dlq show` names an id with no quarantine row.',
    action: 'Check the id with `converge dlq list --all`.',
  },
  CONVERGE_QUARANTINE_RESOLVED: {
    error: 'QuarantineResolvedError',
    carries: '`id`',
    when: 'A quarantine replay or discard names a row that is already closed (replayed or discarded, possibly by someone else meanwhile).',
    action: 'Nothing to redo; `converge dlq show ID` shows its resolution.',
  },
  CONVERGE_BROKER_PLUGIN_MISSING: {
    error: 'BrokerPluginMissingError',
    carries: '`plugin`, `exchangeType`',
    when: '`declarePartitionedTopology`, `converge topology` or `startPartitionedConsumers` (its `ready()` rejects and the consumers stop) found that RabbitMQ does not know the `x-consistent-hash` exchange type: the `rabbitmq_consistent_hash_exchange` plugin is not enabled. The broker closes the connection with 503 COMMAND_INVALID.',
    action:
      'Run `rabbitmq-plugins enable rabbitmq_consistent_hash_exchange` on every broker node (the plugin ships with RabbitMQ; docker-compose.yml enables it), then declare again. Locally, `npm run services` does it.',
  },
  CONVERGE_INVALID_PAYLOAD: {
    error: 'PayloadValidationError',
    carries: '`eventType`, `paths`; also an `EnvelopeValidationError` (`field` = `payload`)',
    when: "A payload does not match its event type's schema in the event catalog (`defineEvents`): at the producer nothing is written; at the consumer the delivery is quarantined as `invalid-envelope` and never applied. The message names the paths, never values.",
    action:
      'Fix the producer (or the schema); `paths` say where. Replay or discard the quarantined copies (`converge dlq`).',
  },
  CONVERGE_NO_ROWS_WRITTEN: {
    error: 'NoRowsWrittenError',
    carries: '`projection`, `rowCount`, `expected`, `writtenFor`',
    when: "The write callback of `applyIncrement`, `applyIncrements` or `applySnapshot` changed fewer rows than expected (0 for one event; fewer than one per aggregate for a batch): usually an `UPDATE` of a read-model row an aggregate's first event should have created. The consumer rolls back (inbox row and version included), retries, then quarantines (`handler-failed`).",
    action:
      "Write with an upsert (`INSERT ... ON CONFLICT DO UPDATE`); return `'unchanged'` for an event that legitimately changes no row. Then replay the quarantined events.",
  },
  CONVERGE_FRESHNESS_TIMEOUT: {
    error: 'FreshnessTimeoutError',
    carries:
      '`projection`, `aggregateType`, `aggregateId`, `version` (awaited), `appliedVersion` (last seen), `timeoutMs`',
    when: '`waitForVersion` waited `timeoutMs` without the projection applying the aggregate at `version` or later.',
    action:
      'Read the source instead (docs/freshness.md, `readFresh`); if it happens often, `converge status --lag-budget` shows which consumer is behind.',
  },
  // ---- Connection and startup failures (ConnectionConfigError, ServiceUnavailableError, SchemaNotMigratedError, WalLevelNotLogicalError, ReadyTimeoutError) ----
  CONVERGE_DATABASE_AUTH_FAILED: {
    error: 'ConnectionConfigError',
    carries: '`failure: { service, endpoint, kind, permanent, detail, reason, hint }`',
    when: 'PostgreSQL refused the password (SQLSTATE 28P01). Permanent: relay and consumer stop before their first cycle instead of retrying; `ready()` rejects; the CLI exits 1.',
    action: 'Fix the password in the connection string (or the secret it comes from).',
  },
  CONVERGE_DATABASE_ACCESS_DENIED: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'PostgreSQL refused the role (SQLSTATE 28000): it does not exist, or no pg_hba.conf entry allows it from this host to this database. Permanent.',
    action: 'Create the role, fix the user name in the connection string, or add a pg_hba.conf entry.',
  },
  CONVERGE_DATABASE_NOT_FOUND: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'The database named in the connection string does not exist (SQLSTATE 3D000). Permanent.',
    action: 'Create the database (`createdb NAME`) or fix the name in the connection string.',
  },
  CONVERGE_DATABASE_URL_INVALID: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'The PostgreSQL connection string cannot be read, or is not a `postgres://` / `postgresql://` URL. Thrown by the constructor, before any connection.',
    action: 'Use `postgres://user:password@host:5432/database` (percent-encode special characters in the password).',
  },
  CONVERGE_DATABASE_REJECTED: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'PostgreSQL or the TLS layer refused the connection for a reason retrying cannot fix (SSL not supported by the server, certificate not trusted).',
    action: 'Fix the `sslmode` / TLS settings or the server certificate.',
  },
  CONVERGE_DATABASE_UNAVAILABLE: {
    error: 'ServiceUnavailableError',
    carries: '`failure`',
    when: 'PostgreSQL cannot be reached now (connection refused or reset, timeout, host not resolved, shutting down, starting up, too many connections). Relay and consumer retry by themselves; a CLI command exits 1 with it.',
    action: 'Start PostgreSQL or fix the network; check host and port in the message.',
  },
  CONVERGE_BROKER_AUTH_FAILED: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'RabbitMQ refused the login (ACCESS_REFUSED, 403): wrong user name or password. Permanent.',
    action: 'Fix the credentials in the AMQP URL, or create the user (`rabbitmqctl add_user`).',
  },
  CONVERGE_BROKER_ACCESS_DENIED: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'RabbitMQ refused the virtual host (NOT_ALLOWED, 530: it does not exist or the user has no permissions on it) or an operation on it (403 on a channel). Permanent.',
    action:
      'Create the vhost (`rabbitmqctl add_vhost`) and grant the user (`rabbitmqctl set_permissions`), or fix the vhost in the URL.',
  },
  CONVERGE_BROKER_URL_INVALID: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'The AMQP URL cannot be read or is not `amqp://` / `amqps://` (e.g. an `http://` management URL). Thrown by the constructor, before any connection.',
    action: 'Use `amqp://user:password@host:5672/vhost` (`amqps://` and port 5671 for TLS).',
  },
  CONVERGE_BROKER_REJECTED: {
    error: 'ConnectionConfigError',
    carries: '`failure`',
    when: 'RabbitMQ or the TLS layer refused something retrying cannot fix: a TLS certificate, an exchange or queue declared with other arguments or type (406).',
    action: 'Fix the TLS settings, or the exchange name or type the message names.',
  },
  CONVERGE_BROKER_UNAVAILABLE: {
    error: 'ServiceUnavailableError',
    carries: '`failure`',
    when: 'RabbitMQ cannot be reached now (connection refused or reset, timeout, handshake cut, broker shutting down). Relay and consumer retry by themselves; a CLI command exits 1 with it.',
    action: 'Start RabbitMQ or fix the network; check host and port in the message.',
  },
  CONVERGE_SCHEMA_NOT_MIGRATED: {
    error: 'SchemaNotMigratedError',
    carries: '`schema`, `endpoint`, `databaseVersion` (0: no tables), `requiredVersion`',
    when: "converge's tables are missing in the schema, or older than this version of converge needs. Checked when relay and consumer start and before each CLI command.",
    action: 'Run `converge migrate` (with the same `--schema`) as the role that owns the schema.',
  },
  CONVERGE_WAL_LEVEL_NOT_LOGICAL: {
    error: 'WalLevelNotLogicalError',
    carries: '`endpoint`, `walLevel` (what the server has)',
    when: 'The CDC relay, `createCdcSlot` or `converge cdc slot create` met a PostgreSQL whose `wal_level` is not `logical`, so it has no logical replication slots. Checked when the CDC relay starts: it stops instead of retrying, `ready()` rejects, `converge relay --mode cdc` exits 1.',
    action:
      "Set `wal_level = logical` (`ALTER SYSTEM SET wal_level = logical` or postgresql.conf) and restart PostgreSQL; or use the polling relay. converge's own tests use the logical cluster `npm run services` starts on port 5433.",
  },
  CONVERGE_READY_TIMEOUT: {
    error: 'ReadyTimeoutError',
    carries: '`component`, `timeoutMs`, `lastFailure`',
    when: '`ready({ timeoutMs })` waited that long without the component connecting; the message names the last failure. The component keeps retrying.',
    action: 'Fix what `lastFailure` names, or call `stop()`.',
  },
  CONVERGE_ADAPTER_MISUSE: {
    error: 'AdapterError',
    carries: '`adapter`',
    when: "An ORM adapter (`converge-events/kysely`, `/knex`, `/drizzle`, `/typeorm`, `/mikro-orm`) got a handle outside a transaction, a view was asked for on something that is not a node-postgres client, a view was asked to open or end a transaction, or a statement could not be translated to the ORM's placeholders (a `$n` without a value, a backslash right before a `?`).",
    action:
      "Pass the ORM's transaction handle (inside its `transaction(...)` callback) and the consumer's `tx`; let the consumer commit; fix the statement the message names.",
  },
} as const satisfies Record<`CONVERGE_${string}`, ErrorCodeDoc>;

/** Every code a ConvergeError can carry. */
export type ConvergeErrorCode = keyof typeof ERROR_CODES;
