/**
 * Errors about the services converge connects to (PostgreSQL, RabbitMQ): a missing broker plugin,
 * classified connection failures, an unmigrated schema, a readiness timeout, a COMMIT that
 * PostgreSQL answered with ROLLBACK. Re-exported by
 * errors.ts, which callers import from; kept apart only to keep errors.ts short.
 */
import { ConvergeError } from './convergence-error.js';
import type { ConvergeErrorCode } from './error-codes.js';

/**
 * RabbitMQ does not know an exchange type converge declares, because the plugin that provides it is
 * not enabled (the `x-consistent-hash` type of partitioned consumer groups). The broker answers the
 * declare by closing the whole connection (503 COMMAND_INVALID); the original error is the `cause`.
 */
export class BrokerPluginMissingError extends ConvergeError {
  constructor(
    readonly plugin: string,
    readonly exchangeType: string,
    options?: { cause?: unknown },
  ) {
    super(
      'CONVERGE_BROKER_PLUGIN_MISSING',
      `RabbitMQ does not know the exchange type '${exchangeType}': the plugin ${plugin} is not enabled; ` +
        `enable it with: rabbitmq-plugins enable ${plugin}`,
      options,
    );
  }
}

/**
 * PostgreSQL answered COMMIT with the command tag ROLLBACK, and no error: a statement inside the
 * transaction failed, someone caught its error, and the aborted transaction could only end in a
 * rollback. Nothing of the transaction was written. converge throws this from every COMMIT it
 * runs, so a caller, a consumer or a tool never takes a rolled-back transaction for done.
 */
export class CommitRolledBackError extends ConvergeError {
  constructor() {
    super(
      'CONVERGE_COMMIT_ROLLED_BACK',
      'PostgreSQL answered COMMIT with ROLLBACK: nothing was written, because an SQL error inside the ' +
        'transaction aborted it and was caught; let the error propagate, or use a SAVEPOINT or ' +
        'INSERT ... ON CONFLICT for an error that is meant to be ignored',
    );
  }
}

// ---- Connection and startup failures: which service, where, why, and whether waiting helps ----

/** The two services converge connects to, as named in messages and log lines. */
export type ConnectionService = 'PostgreSQL' | 'RabbitMQ';

/**
 * What went wrong with a connection. Every kind but `unavailable` is permanent: the same
 * configuration will fail the same way, so retrying only hides it.
 */
export type ConnectionFailureKind =
  'auth-failed' | 'access-denied' | 'not-found' | 'invalid-url' | 'rejected' | 'unavailable';

/**
 * A classified connection failure (see classifyDatabaseError / classifyBrokerError). Safe to log
 * and print: `endpoint` is host:port only, never a user name or password; `reason` is converge's
 * own wording, never the driver's message.
 */
export interface ConnectionFailure {
  service: ConnectionService;
  /** `host:port` (or the socket path), `(unparseable url)` when the URL could not be read. */
  endpoint: string;
  kind: ConnectionFailureKind;
  permanent: boolean;
  /** The driver's or the system's code: a SQLSTATE (`28P01`), an AMQP reply (`ACCESS_REFUSED`), `ECONNREFUSED`, `URL`. */
  detail: string;
  reason: string;
  /** What to do about it, when converge can tell. */
  hint?: string;
}

const CONNECTION_CODES = {
  PostgreSQL: {
    'auth-failed': 'CONVERGE_DATABASE_AUTH_FAILED',
    'access-denied': 'CONVERGE_DATABASE_ACCESS_DENIED',
    'not-found': 'CONVERGE_DATABASE_NOT_FOUND',
    'invalid-url': 'CONVERGE_DATABASE_URL_INVALID',
    rejected: 'CONVERGE_DATABASE_REJECTED',
    unavailable: 'CONVERGE_DATABASE_UNAVAILABLE',
  },
  RabbitMQ: {
    'auth-failed': 'CONVERGE_BROKER_AUTH_FAILED',
    // NOT_ALLOWED does not tell a missing vhost from a forbidden one.
    'access-denied': 'CONVERGE_BROKER_ACCESS_DENIED',
    'not-found': 'CONVERGE_BROKER_ACCESS_DENIED',
    'invalid-url': 'CONVERGE_BROKER_URL_INVALID',
    rejected: 'CONVERGE_BROKER_REJECTED',
    unavailable: 'CONVERGE_BROKER_UNAVAILABLE',
  },
} as const satisfies Record<ConnectionService, Record<ConnectionFailureKind, ConvergeErrorCode>>;

/** One line naming the service, where, why, and the fix: `RabbitMQ at 127.0.0.1:5672: login refused … (ACCESS_REFUSED); fix …`. */
export function describeFailure(failure: ConnectionFailure): string {
  return `${failure.service} at ${failure.endpoint}: ${failure.reason} (${failure.detail})${failure.hint ? `; ${failure.hint}` : ''}`;
}

/**
 * A connection that can never work as configured: wrong password or role, missing database,
 * refused vhost, unparseable URL, TLS refused. Relay and consumer stop at once instead of retrying.
 */
export class ConnectionConfigError extends ConvergeError {
  constructor(
    readonly failure: ConnectionFailure,
    options?: { cause?: unknown },
  ) {
    super(CONNECTION_CODES[failure.service][failure.kind], describeFailure(failure), options);
  }
}

/**
 * A service that cannot be reached now (refused, reset, timed out, shutting down, starting).
 * Relay and consumer retry these themselves; one-shot callers (CLI commands, `ready()`) get it.
 */
export class ServiceUnavailableError extends ConvergeError {
  constructor(
    readonly failure: ConnectionFailure,
    options?: { cause?: unknown },
  ) {
    super(CONNECTION_CODES[failure.service].unavailable, describeFailure(failure), options);
  }
}

/** The typed error for a classified failure: ConnectionConfigError if permanent, ServiceUnavailableError otherwise. */
export function connectionError(
  failure: ConnectionFailure,
  cause?: unknown,
): ConnectionConfigError | ServiceUnavailableError {
  return failure.permanent
    ? new ConnectionConfigError(failure, { cause })
    : new ServiceUnavailableError(failure, { cause });
}

/** converge's tables are missing or older than this converge needs. */
export class SchemaNotMigratedError extends ConvergeError {
  constructor(
    readonly schema: string,
    readonly endpoint: string,
    /** 0 when there is no migrations table at all; null when the role may not read it and tables are missing. */
    readonly databaseVersion: number | null,
    readonly requiredVersion: number,
  ) {
    const found =
      databaseVersion === 0
        ? 'has no converge tables'
        : databaseVersion === null
          ? 'lacks tables'
          : `is at migration ${databaseVersion}`;
    super(
      'CONVERGE_SCHEMA_NOT_MIGRATED',
      `PostgreSQL at ${endpoint}: schema "${schema}" ${found}, this converge needs migration ${requiredVersion}; run \`converge migrate\``,
    );
  }
}

/**
 * The CDC relay (or `createCdcSlot`) met a PostgreSQL whose `wal_level` is not `logical`, so it
 * cannot create or read a logical replication slot. The setting only changes with a restart, so
 * retrying cannot help: the relay stops and `ready()` rejects with this.
 */
export class WalLevelNotLogicalError extends ConvergeError {
  constructor(
    readonly endpoint: string,
    /** What the server reports (`replica`, `minimal`). */
    readonly walLevel: string,
  ) {
    super(
      'CONVERGE_WAL_LEVEL_NOT_LOGICAL',
      `PostgreSQL at ${endpoint} has wal_level=${walLevel}; the CDC relay reads a logical replication slot, which needs wal_level=logical: ` +
        'set it (`ALTER SYSTEM SET wal_level = logical` or postgresql.conf) and restart PostgreSQL, or use the polling relay; ' +
        "for converge's own tests, `npm run services` starts a local cluster with wal_level=logical on port 5433",
    );
  }
}

/** `ready({ timeoutMs })` gave up waiting; the component keeps trying. `lastFailure` says what it was waiting for. */
export class ReadyTimeoutError extends ConvergeError {
  constructor(
    readonly component: string,
    readonly timeoutMs: number,
    readonly lastFailure?: ConnectionFailure,
  ) {
    super(
      'CONVERGE_READY_TIMEOUT',
      `${component} not ready after ${timeoutMs} ms${lastFailure ? `; last failure: ${describeFailure(lastFailure)}` : ''}`,
    );
  }
}

/**
 * An ORM adapter was used in a way that would break "the event is written on the caller's own
 * transaction": a handle outside a transaction, a view that would open or end a transaction on
 * the consumer's connection, or SQL its placeholders cannot carry. Never quotes values.
 */
export class AdapterError extends ConvergeError {
  constructor(
    readonly adapter: string,
    problem: string,
  ) {
    super('CONVERGE_ADAPTER_MISUSE', `${adapter} adapter: ${problem}`);
  }
}
