/**
 * The error table (ERROR_CODES) and the error classes agree: every ConvergeError subclass throws
 * only codes from the table, under the class the table names, and every code in the table is
 * thrown by some class. docs/reference/errors.md is what the table renders.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as errors from '../../src/runtime/errors.js';
import {
  BodyTooLargeError,
  BrokerPluginMissingError,
  CommitRolledBackError,
  ConcurrencyConflictError,
  ConfigError,
  ConnectionConfigError,
  ReadyTimeoutError,
  AdapterError,
  FreshnessTimeoutError,
  SchemaNotMigratedError,
  ServiceUnavailableError,
  WalLevelNotLogicalError,
  ContentConflictError,
  ConvergeError,
  ERROR_CODES,
  EnvelopeValidationError,
  InvalidIdentifierError,
  MalformedBodyError,
  NoRowsWrittenError,
  PayloadValidationError,
  PermanentError,
  PublishError,
  QuarantineNotFoundError,
  QuarantineResolvedError,
  SchemaTooNewError,
  StaleVersionError,
  TransientError,
  UnsupportedSchemaVersionError,
  IncompatibleSchemaVersionError,
  VersionGapError,
  type ConvergeErrorCode,
  type PublishFailure,
} from '../../src/runtime/errors.js';
import * as root from '../../src/errors.js';
import { ERRORS_DOC, errorsReferenceIsCurrent, renderErrorsReference } from '../../scripts/docs/errors.js';

const key = { projection: 'order_view', aggregateType: 'order', aggregateId: 'o-1' };
const PUBLISH_FAILURES: PublishFailure[] = ['nacked', 'returned', 'confirm-timeout', 'channel-closed', 'unencodable'];

/** Instances of every subclass, one per code it can carry. A new subclass must be added here. */
const SAMPLES: Record<string, () => ConvergeError[]> = {
  ConfigError: () => [new ConfigError('batchSize', 'too small'), new ConfigError([{ path: 'a', message: 'b' }])],
  InvalidIdentifierError: () => [new InvalidIdentifierError('bad-name', 'schema')],
  EnvelopeValidationError: () => [new EnvelopeValidationError('eventId', 'required')],
  MalformedBodyError: () => [new MalformedBodyError('not valid JSON')],
  BodyTooLargeError: () => [new BodyTooLargeError(300_000, 262_144)],
  ConcurrencyConflictError: () => [new ConcurrencyConflictError(0)],
  CommitRolledBackError: () => [new CommitRolledBackError()],
  ContentConflictError: () => [new ContentConflictError('search', 'e-1', 'aa', 'bb')],
  VersionGapError: () => [new VersionGapError(key, 3, 1)],
  StaleVersionError: () => [new StaleVersionError(key, 2, 2)],
  PublishError: () => PUBLISH_FAILURES.map((reason) => new PublishError(reason)),
  SchemaTooNewError: () => [new SchemaTooNewError(12, 9)],
  PermanentError: () => [new PermanentError('rejected')],
  TransientError: () => [new TransientError('later')],
  UnsupportedSchemaVersionError: () => [
    new UnsupportedSchemaVersionError('OrderPaid', 4, 2, 'newer than this consumer knows'),
  ],
  IncompatibleSchemaVersionError: () => [new IncompatibleSchemaVersionError('OrderPaid', 3, ['billing'])],
  QuarantineNotFoundError: () => [new QuarantineNotFoundError('42')],
  QuarantineResolvedError: () => [new QuarantineResolvedError('42', 'replayed'), new QuarantineResolvedError('42')],
  BrokerPluginMissingError: () => [
    new BrokerPluginMissingError('rabbitmq_consistent_hash_exchange', 'x-consistent-hash'),
  ],
  PayloadValidationError: () => [new PayloadValidationError('OrderPlaced', ['total', 'lines.0.qty'])],
  NoRowsWrittenError: () => [
    new NoRowsWrittenError('order_view', 0, 1, { aggregateType: 'order', aggregateId: 'o-1', version: 1 }),
    new NoRowsWrittenError('order_view', 2, 3, { aggregates: 3, events: 5 }),
  ],
  // Connection and startup failures: every service and kind that has a code of its own.
  ConnectionConfigError: () =>
    (['auth-failed', 'access-denied', 'not-found', 'invalid-url', 'rejected'] as const).flatMap((kind) =>
      (['PostgreSQL', 'RabbitMQ'] as const).map(
        (service) =>
          new ConnectionConfigError({
            service,
            endpoint: 'db:5432',
            kind,
            permanent: true,
            detail: 'X',
            reason: 'why',
          }),
      ),
    ),
  ServiceUnavailableError: () =>
    (['PostgreSQL', 'RabbitMQ'] as const).map(
      (service) =>
        new ServiceUnavailableError({
          service,
          endpoint: 'db:5432',
          kind: 'unavailable',
          permanent: false,
          detail: 'ECONNREFUSED',
          reason: 'refused',
        }),
    ),
  SchemaNotMigratedError: () => [new SchemaNotMigratedError('converge', 'db:5432', 0, 9)],
  WalLevelNotLogicalError: () => [new WalLevelNotLogicalError('db:5432', 'replica')],
  ReadyTimeoutError: () => [new ReadyTimeoutError('consumer orders', 5_000)],
  AdapterError: () => [new AdapterError('knex', 'not inside a transaction')],
  FreshnessTimeoutError: () => [new FreshnessTimeoutError('order_view', 'order', 'o-1', 3, 2, 1_000)],
};

/** Every class errors.ts exports that extends ConvergeError. */
const subclasses = Object.entries(errors).filter(
  ([, value]) => typeof value === 'function' && value.prototype instanceof ConvergeError,
) as [string, new (...args: never[]) => ConvergeError][];

describe('error codes', () => {
  it('every ConvergeError subclass has samples, and every sample is of its class', () => {
    assert.deepEqual(subclasses.map(([name]) => name).sort(), Object.keys(SAMPLES).sort());
    for (const [name, cls] of subclasses) {
      for (const sample of SAMPLES[name]!()) {
        assert.equal(sample.constructor, cls);
        assert.equal(sample.name, name);
      }
    }
  });

  it("every code a class throws is in the table, under that class's name", () => {
    for (const [name, make] of Object.entries(SAMPLES)) {
      for (const sample of make()) {
        assert.ok(
          Object.hasOwn(ERROR_CODES, sample.code),
          `${name} throws ${sample.code}, which is not in ERROR_CODES`,
        );
        assert.equal(ERROR_CODES[sample.code].error, name, `ERROR_CODES.${sample.code} names ${name}`);
      }
    }
  });

  it('every code in the table is thrown by some class', () => {
    const thrown = new Set(Object.values(SAMPLES).flatMap((make) => make().map((sample) => sample.code)));
    assert.deepEqual([...thrown].sort(), Object.keys(ERROR_CODES).sort());
  });

  it('every row says when and what to do, and names a class converge-events/errors exports', () => {
    for (const [code, doc] of Object.entries(ERROR_CODES)) {
      assert.match(code, /^CONVERGE_[A-Z_]+$/);
      assert.ok(doc.when.length > 20 && doc.action.length > 10, `${code} is documented`);
      assert.ok(doc.error in root, `${doc.error} (for ${code}) is exported from converge-events/errors`);
    }
  });

  it('converge-events/errors exports every error class', () => {
    for (const [name] of subclasses) assert.ok(name in root, `${name} is exported from converge-events/errors`);
    assert.equal(root.ConvergeError, ConvergeError);
  });

  it('PublishError maps each reason to its own code', () => {
    const codes = PUBLISH_FAILURES.map((reason) => new PublishError(reason).code);
    assert.deepEqual(codes, [
      'CONVERGE_PUBLISH_NACKED',
      'CONVERGE_PUBLISH_RETURNED',
      'CONVERGE_PUBLISH_CONFIRM_TIMEOUT',
      'CONVERGE_PUBLISH_CHANNEL_CLOSED',
      'CONVERGE_PUBLISH_UNENCODABLE',
    ] satisfies ConvergeErrorCode[]);
  });

  it('the quarantine errors keep the codes and messages the dlq threw before they were classes', () => {
    const missing = new QuarantineNotFoundError('42');
    assert.equal(missing.code, 'CONVERGE_QUARANTINE_NOT_FOUND');
    assert.equal(missing.message, 'no quarantined message 42');
    assert.equal(missing.id, '42');
    const closed = new QuarantineResolvedError('42', 'discarded');
    assert.equal(closed.code, 'CONVERGE_QUARANTINE_RESOLVED');
    assert.equal(closed.message, 'quarantined message 42 was already discarded');
    assert.equal(
      new QuarantineResolvedError('42').message,
      'quarantined message 42 was closed by someone else meanwhile',
    );
  });

  it('docs/reference/errors.md is what the table renders, one row per code', () => {
    assert.ok(errorsReferenceIsCurrent(), `${ERRORS_DOC} is out of date; run npm run docs`);
    const rows = renderErrorsReference()
      .split('\n')
      .filter((line) => line.startsWith('| `CONVERGE_'));
    assert.deepEqual(
      rows.map((line) => line.split('`')[1]),
      Object.keys(ERROR_CODES),
    );
  });
});
