/**
 * Turns what pg, amqplib and the OS report when a connection fails into a ConnectionFailure:
 * which service, where (host:port, never a user or password), why, and whether waiting can
 * help. Pure: it reads error shapes and URLs, opens nothing. The shapes were taken from the
 * real drivers (pg 8, amqplib 2) against a live PostgreSQL and RabbitMQ; see
 * test/unit/connection-failure.test.ts and docs/troubleshooting.md.
 */
import {
  ConnectionConfigError,
  SchemaNotMigratedError,
  ServiceUnavailableError,
  WalLevelNotLogicalError,
} from './errors.js';
import type { ConnectionFailure, ConnectionFailureKind, ConnectionService } from './errors.js';
import { describeError } from './logger.js';
import { parseHostList, type HostList } from './host-list.js';
import { poolerLoginCode } from './pooler-login.js';
import {
  brokerTarget,
  databaseTarget,
  parseDatabaseUrl,
  parseUrl,
  type ConnectionTarget,
} from './connection-target.js';

/** Node's socket and DNS codes that say "not now" rather than "never". */
const TRANSIENT_SYSTEM: Record<string, string> = {
  ECONNREFUSED: 'connection refused, nothing listens there (yet)',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'connection timed out',
  EPIPE: 'connection broken',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EHOSTDOWN: 'host down',
  EAI_AGAIN: 'host name lookup failed temporarily',
  // A name that does not resolve may be a typo, or a service that is not registered yet (containers).
  ENOTFOUND: 'host name not found',
};

/** TLS verification failures: the same certificate will be refused again. */
const TLS_CODES =
  /^(?:ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH)/;

function codeOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' || typeof code === 'number' ? String(code) : undefined;
}

function messageOf(err: unknown): string {
  if (typeof err !== 'object' || err === null) return '';
  const message = (err as { message?: unknown }).message;
  return typeof message === 'string' ? message : '';
}

function failure(
  service: ConnectionService,
  target: ConnectionTarget,
  kind: ConnectionFailureKind,
  detail: string,
  reason: string,
  hint?: string,
): ConnectionFailure {
  return {
    service,
    endpoint: target.endpoint,
    kind,
    permanent: kind !== 'unavailable',
    detail,
    reason,
    ...(hint ? { hint } : {}),
  };
}

/** A connection string pg cannot use as meant, as a permanent failure; undefined when it is fine. */
export function checkDatabaseUrl(connectionString: string): ConnectionFailure | undefined {
  if (connectionString.startsWith('/')) return undefined;
  const target = databaseTarget(connectionString);
  let list: HostList | undefined;
  try {
    list = parseHostList(connectionString);
  } catch (err) {
    return failure(
      'PostgreSQL',
      target,
      'invalid-url',
      'URL',
      `the connection string's host list is not usable: ${(err as Error).message}`,
      'write it as libpq does: postgres://user@host1:5432,host2:5432/database?target_session_attrs=read-write',
    );
  }
  const single = list ? list.urlFor(list.hosts[0]!) : connectionString;
  return checkUrlScheme('PostgreSQL', target, parseDatabaseUrl(single)?.url, {
    noun: 'the connection string',
    schemes: ['postgres:', 'postgresql:', 'socket:'],
    expected: 'postgres: or postgresql:',
    hint: 'use postgres://user:password@host:5432/database (percent-encode special characters)',
  });
}

/** An AMQP URL amqplib cannot use, as a permanent failure; undefined when it is fine. */
export function checkBrokerUrl(amqpUrl: string): ConnectionFailure | undefined {
  return checkUrlScheme('RabbitMQ', brokerTarget(amqpUrl), parseUrl(amqpUrl), {
    noun: 'the AMQP URL',
    schemes: ['amqp:', 'amqps:'],
    expected: 'amqp: or amqps:',
    hint: 'use amqp://user:password@host:5672/vhost (amqps:// for TLS)',
  });
}

/** An unparseable URL or one whose scheme the driver does not speak, as a permanent failure. */
function checkUrlScheme(
  service: ConnectionService,
  target: ConnectionTarget,
  url: URL | undefined,
  rule: { noun: string; schemes: string[]; expected: string; hint: string },
): ConnectionFailure | undefined {
  if (!url) return failure(service, target, 'invalid-url', 'URL', `${rule.noun} is not a URL`, rule.hint);
  if (rule.schemes.includes(url.protocol)) return undefined;
  const reason = `${rule.noun} has scheme "${url.protocol}", expected ${rule.expected}`;
  return failure(service, target, 'invalid-url', 'URL', reason, rule.hint);
}

/** Failures every driver reports the same way: socket, DNS, TLS, an unparseable URL. */
function classifyCommon(
  service: ConnectionService,
  target: ConnectionTarget,
  code: string | undefined,
): ConnectionFailure | undefined {
  if (code === undefined) return undefined;
  const system = TRANSIENT_SYSTEM[code];
  if (system) return failure(service, target, 'unavailable', code, system);
  if (TLS_CODES.test(code))
    return failure(
      service,
      target,
      'rejected',
      code,
      'TLS certificate refused',
      'check the CA, the certificate and the host name',
    );
  if (code === 'ERR_INVALID_URL') return failure(service, target, 'invalid-url', 'URL', 'the URL is not a URL');
  return undefined;
}

/**
 * A PostgreSQL connection failure, or undefined for an error that is not about the connection
 * (a SQL error, a bug) so the caller can treat it its own way.
 */
export function classifyDatabaseError(err: unknown, target: ConnectionTarget): ConnectionFailure | undefined {
  const message = messageOf(err);
  const code = poolerLoginCode(codeOf(err), message);
  const db = target.name ? `database "${target.name}"` : 'the database';
  switch (code) {
    case '28P01':
      return failure(
        'PostgreSQL',
        target,
        'auth-failed',
        code,
        'password authentication failed',
        'fix the password in the connection string',
      );
    case '28000':
      return failure(
        'PostgreSQL',
        target,
        'access-denied',
        code,
        `the role does not exist, or pg_hba.conf does not let it connect to ${db} from this host`,
        'fix the user name in the connection string, create the role, or add a pg_hba.conf entry',
      );
    case '3D000':
      return failure(
        'PostgreSQL',
        target,
        'not-found',
        code,
        `${db} does not exist`,
        'create it or fix the database name in the connection string',
      );
    case '57P01':
    case '57P02':
      return failure('PostgreSQL', target, 'unavailable', code, 'the server is shutting down');
    case '57P03':
      return failure('PostgreSQL', target, 'unavailable', code, 'the server is starting up or in recovery');
    case '08004':
      // NoSuitableHostError (db/failover-client.ts): a standby not yet promoted, or every host down.
      return failure(
        'PostgreSQL',
        target,
        'unavailable',
        code,
        'the server rejected the session, or no host of the list gave the kind of session target_session_attrs asks for (a standby not yet promoted)',
      );
    case '53300':
      return failure('PostgreSQL', target, 'unavailable', code, 'too many connections');
  }
  if (code && /^(?:08|53|57P)/.test(code))
    return failure('PostgreSQL', target, 'unavailable', code, 'connection failure reported by the server');
  const common = classifyCommon('PostgreSQL', target, code);
  if (common) return common;
  if (/does not support SSL/i.test(message))
    return failure(
      'PostgreSQL',
      target,
      'rejected',
      'SSL',
      'the server does not support SSL',
      'drop sslmode or enable SSL on the server',
    );
  if (
    /Connection terminated|connection timeout|timeout expired|Client has encountered a connection error/i.test(message)
  )
    return failure('PostgreSQL', target, 'unavailable', 'TERMINATED', 'connection terminated or timed out');
  return undefined;
}

/**
 * An AMQP connection or channel failure. amqplib reports the handshake in messages only (the
 * ConnectionClose for a refused vhost arrives without its reply text), so those are matched
 * by wording; channel errors carry the AMQP reply code as a number.
 */
export function classifyBrokerError(err: unknown, target: ConnectionTarget): ConnectionFailure | undefined {
  const code = codeOf(err);
  const message = messageOf(err);
  const vhost = target.name !== undefined ? `vhost "${target.name}"` : 'the vhost';
  if (/ACCESS[-_]REFUSED/.test(message) && /Handshake terminated|Login was refused/i.test(message))
    return failure(
      'RabbitMQ',
      target,
      'auth-failed',
      'ACCESS_REFUSED',
      'login refused: wrong user name or password',
      'fix the credentials in the AMQP URL',
    );
  if (/Expected ConnectionOpenOk; got <ConnectionClose/.test(message) || /NOT[-_]ALLOWED/.test(message))
    return failure(
      'RabbitMQ',
      target,
      'access-denied',
      'NOT_ALLOWED',
      `${vhost} does not exist or the user has no permissions on it`,
      'create the vhost and grant the user (rabbitmqctl add_vhost / set_permissions), or fix the vhost in the URL',
    );
  if (/Expected amqp: or amqps: as the protocol/.test(message))
    return failure('RabbitMQ', target, 'invalid-url', 'URL', 'the AMQP URL scheme is not amqp: or amqps:');
  switch (code) {
    case '403':
      return failure(
        'RabbitMQ',
        target,
        'access-denied',
        'ACCESS_REFUSED',
        `the user may not do this on ${vhost}`,
        'grant the user configure/write permissions',
      );
    case '404':
      // Often someone else's job (converge topology, the consumer that declares): wait for it.
      return failure(
        'RabbitMQ',
        target,
        'unavailable',
        'NOT_FOUND',
        'an exchange or queue it needs does not exist (yet)',
      );
    case '406':
      return failure(
        'RabbitMQ',
        target,
        'rejected',
        'PRECONDITION_FAILED',
        'an exchange or queue exists with other arguments or type',
      );
    case '320':
      return failure(
        'RabbitMQ',
        target,
        'unavailable',
        'CONNECTION_FORCED',
        'the broker closed the connection (shutdown or restart)',
      );
  }
  const common = classifyCommon('RabbitMQ', target, code);
  if (common) return common;
  if (/Socket closed abruptly during opening handshake/.test(message))
    return failure(
      'RabbitMQ',
      target,
      'unavailable',
      'HANDSHAKE_CLOSED',
      'connection closed during the AMQP handshake (broker starting, or the port is not an AMQP listener)',
    );
  if (/Handshake terminated by server/.test(message))
    return failure('RabbitMQ', target, 'unavailable', 'HANDSHAKE_CLOSED', 'the broker ended the handshake');
  if (/(?:Connection|Channel) closed|Unexpected close|heartbeat timeout/i.test(message))
    return failure('RabbitMQ', target, 'unavailable', 'CLOSED', 'connection or channel closed');
  return undefined;
}

/** A transient failure for an error no rule knows, with its code (never its message, which may quote data). */
export function unknownFailure(service: ConnectionService, target: ConnectionTarget, err: unknown): ConnectionFailure {
  const detail = codeOf(err) ?? (err instanceof Error ? err.name : typeof err);
  return failure(service, target, 'unavailable', detail, 'unexpected error');
}

/** The structured fields of a failure for a log line: service, endpoint, code, reason. */
export function failureFields(f: ConnectionFailure): {
  service: ConnectionService;
  endpoint: string;
  code: string;
  reason: string;
} {
  return { service: f.service, endpoint: f.endpoint, code: f.detail, reason: f.reason };
}

export interface JudgedFailure {
  /** The classified connection failure, if it was one. */
  failure: ConnectionFailure | undefined;
  /** Set when the component must stop: a permanent misconfiguration before it ever worked (wal_level for CDC included). */
  fatal: ConnectionConfigError | SchemaNotMigratedError | WalLevelNotLogicalError | undefined;
  /** What to log: service, endpoint, code and reason, or the error's class and code. Never a message with data. */
  fields: Record<string, unknown>;
}

/**
 * How a relay or consumer treats a failed attempt. Before it ever worked, a permanent failure
 * (wrong password, role, database, vhost, URL, unmigrated schema, wal_level not logical for CDC)
 * stops it; after, the same failure is more likely passing (a broker restoring its definitions,
 * a password being rotated) and is retried, logged as an error. An error that names no service
 * is taken as a database one when it has a SQLSTATE-looking shape, else logged by class and code.
 */
export function judgeFailure(err: unknown, databaseTarget: ConnectionTarget, established: boolean): JudgedFailure {
  if ((err instanceof SchemaNotMigratedError || err instanceof WalLevelNotLogicalError) && !established)
    return { failure: undefined, fatal: err, fields: { code: err.code, err: err.message } };
  const failure =
    err instanceof ConnectionConfigError || err instanceof ServiceUnavailableError
      ? err.failure
      : classifyDatabaseError(err, databaseTarget);
  if (!failure) return { failure, fatal: undefined, fields: describeError(err) };
  const fields = { ...failureFields(failure), ...(failure.hint ? { hint: failure.hint } : {}) };
  if (failure.permanent && !established) {
    const fatal = err instanceof ConnectionConfigError ? err : new ConnectionConfigError(failure, { cause: err });
    return { failure, fatal, fields };
  }
  return { failure, fatal: undefined, fields };
}
