/**
 * Every error converge throws on purpose is a ConvergeError with a stable `code`,
 * so callers can branch on `err.code` (or `instanceof`) instead of parsing messages.
 * Messages name fields, ids and versions, never payload contents.
 */

import { ConvergeError } from './convergence-error.js';
import type { ConvergeErrorCode } from './error-codes.js';

export { ERROR_CODES } from './error-codes.js';
export type { ConvergeErrorCode, ErrorCodeDoc } from './error-codes.js';
export { ConvergeError } from './convergence-error.js';
// Errors about the services converge connects to live in their own file; this stays the one place to import from.
export * from './service-errors.js';

/** An options object failed validation; `field` is the dotted path of the bad option. */
export interface ConfigProblem {
  /** Dotted option path, e.g. `reorderBuffer.maxTotal`. */
  path: string;
  message: string;
}

/**
 * Options that failed validation. `problems` lists every one of them; `field` is the first
 * path, kept for callers that check a single field.
 */
export class ConfigError extends ConvergeError {
  readonly field: string;
  readonly problems: readonly ConfigProblem[];

  constructor(fieldOrProblems: string | readonly ConfigProblem[], reason = 'invalid') {
    const problems =
      typeof fieldOrProblems === 'string' ? [{ path: fieldOrProblems, message: reason }] : fieldOrProblems;
    const listed = problems.map((p) => `"${p.path}": ${p.message}`);
    super(
      'CONVERGE_INVALID_CONFIG',
      listed.length === 1 ? `invalid option ${listed[0]}` : `${listed.length} invalid options: ${listed.join('; ')}`,
    );
    this.problems = problems;
    this.field = problems[0]?.path ?? '(options)';
  }
}

/**
 * A schema, table or role name that is not a plain SQL identifier. `field` names the option it
 * came from when known; the message never quotes the name itself, which may be an injection attempt.
 */
export class InvalidIdentifierError extends ConvergeError {
  constructor(
    readonly identifier: string,
    readonly field?: string,
  ) {
    super(
      'CONVERGE_INVALID_IDENTIFIER',
      `${field ? `invalid option "${field}": ` : ''}not a valid identifier: must match /^[a-z_][a-z0-9_]{0,62}$/`,
    );
  }
}

type EnvelopeErrorCode =
  'CONVERGE_INVALID_ENVELOPE' | 'CONVERGE_MALFORMED_BODY' | 'CONVERGE_BODY_TOO_LARGE' | 'CONVERGE_INVALID_PAYLOAD';

/** An envelope (outgoing or received) is malformed; `field` names the offending field, never its value. */
export class EnvelopeValidationError extends ConvergeError {
  constructor(
    readonly field: string,
    reason: string,
    code: EnvelopeErrorCode = 'CONVERGE_INVALID_ENVELOPE',
  ) {
    super(code, `invalid envelope field "${field}": ${reason}`);
  }
}

/**
 * A received body that cannot be read as a JSON object at all: empty, not UTF-8, not JSON,
 * nested too deeply, or JSON that is not an object. `field` is always "(body)". It is an
 * EnvelopeValidationError too, so code that handles those keeps working; the consumer
 * quarantines it as `malformed-body`, which tells a broken producer from a wrong field.
 */
export class MalformedBodyError extends EnvelopeValidationError {
  constructor(reason: string) {
    super('(body)', reason, 'CONVERGE_MALFORMED_BODY');
  }
}

/** A received body over `maxEnvelopeBytes`, rejected before anything parses it (quarantined as `body-too-large`). */
export class BodyTooLargeError extends EnvelopeValidationError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super('(body)', `${bytes} bytes exceeds limit of ${limit}`, 'CONVERGE_BODY_TOO_LARGE');
  }
}

/**
 * A conditional business update changed a number of rows other than one: another
 * transaction won the race, so the caller's transaction (business change and outbox row) must roll back.
 */
export class ConcurrencyConflictError extends ConvergeError {
  constructor(readonly rowCount: number) {
    super('CONVERGE_CONCURRENT_UPDATE', `conditional update expected to change exactly 1 row, changed ${rowCount}`);
  }
}

/** The same eventId arrived again with a different fingerprint: never applied, kept for a person. */
export class ContentConflictError extends ConvergeError {
  constructor(
    readonly consumer: string,
    readonly eventId: string,
    readonly storedFingerprint: string,
    readonly receivedFingerprint: string,
  ) {
    super(
      'CONVERGE_CONTENT_CONFLICT',
      `event ${eventId} was already recorded by consumer ${consumer} with different content`,
    );
  }
}

export interface AggregateKey {
  projection: string;
  aggregateType: string;
  aggregateId: string;
}

/** An incremental event does not sit on top of the projection's current version: the event must wait. */
export class VersionGapError extends ConvergeError {
  constructor(
    readonly key: AggregateKey,
    readonly eventVersion: number,
    readonly currentVersion: number,
  ) {
    super(
      'CONVERGE_VERSION_GAP',
      `${key.aggregateType}/${key.aggregateId} in ${key.projection} is at version ${currentVersion}; ` +
        `event version ${eventVersion} must wait for version ${eventVersion - 1}`,
    );
  }
}

/**
 * An incremental event with a new eventId carries a version the projection already has
 * (and no trusted baseline covers it). Waiting cannot fix it, so it goes to quarantine.
 */
export class StaleVersionError extends ConvergeError {
  constructor(
    readonly key: AggregateKey,
    readonly eventVersion: number,
    readonly currentVersion: number,
  ) {
    super(
      'CONVERGE_STALE_VERSION',
      `${key.aggregateType}/${key.aggregateId} in ${key.projection} is already at version ${currentVersion}; ` +
        `a different event claims version ${eventVersion}`,
    );
  }
}

/** `unencodable`: the row cannot become a valid message (e.g. routing key too long); retrying cannot help. */
export type PublishFailure = 'nacked' | 'returned' | 'confirm-timeout' | 'channel-closed' | 'unencodable';

const PUBLISH_CODES = {
  nacked: 'CONVERGE_PUBLISH_NACKED',
  returned: 'CONVERGE_PUBLISH_RETURNED',
  'confirm-timeout': 'CONVERGE_PUBLISH_CONFIRM_TIMEOUT',
  'channel-closed': 'CONVERGE_PUBLISH_CHANNEL_CLOSED',
  unencodable: 'CONVERGE_PUBLISH_UNENCODABLE',
} as const satisfies Record<PublishFailure, ConvergeErrorCode>;

/** The broker did not take responsibility for a message; the outbox row stays unpublished. */
export class PublishError extends ConvergeError {
  constructor(
    readonly reason: PublishFailure,
    detail?: string,
  ) {
    super(PUBLISH_CODES[reason], `publish ${reason}${detail ? `: ${detail}` : ''}`);
  }
}

/** The database holds migrations newer than this version of converge knows. */
export class SchemaTooNewError extends ConvergeError {
  constructor(
    readonly databaseVersion: number,
    readonly knownVersion: number,
  ) {
    super(
      'CONVERGE_SCHEMA_TOO_NEW',
      `database schema is at migration ${databaseVersion}, this converge knows up to ${knownVersion}`,
    );
  }
}

/**
 * Thrown by a handler when retrying cannot help (a business rule rejects the event, a
 * referenced record will never exist): the delivery is quarantined at once, not retried.
 * The message goes to the quarantine row next to the raw body, never to the logs.
 */
export class PermanentError extends ConvergeError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONVERGE_PERMANENT', message, options);
  }
}

/**
 * Thrown by a handler when waiting will help (a dependency is down or rate-limits): the
 * delivery is retried with backoff without the `maxAttempts` limit, like a database outage.
 */
export class TransientError extends ConvergeError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONVERGE_TRANSIENT', message, options);
  }
}

/** An event's schemaVersion is newer than this consumer knows, or no upcaster bridges its version. */
export class UnsupportedSchemaVersionError extends ConvergeError {
  constructor(
    readonly eventType: string,
    readonly schemaVersion: number,
    readonly currentVersion: number,
    reason: string,
  ) {
    super(
      'CONVERGE_UNSUPPORTED_SCHEMA_VERSION',
      `${eventType} schemaVersion ${schemaVersion} (current ${currentVersion}): ${reason}`,
    );
  }
}

/**
 * The compat guard refused to write an event version some live consumer does not read (the
 * article's rule: consumers roll out first). `consumers` names them; nothing was appended.
 */
export class IncompatibleSchemaVersionError extends ConvergeError {
  constructor(
    readonly eventType: string,
    readonly schemaVersion: number,
    readonly consumers: readonly string[],
  ) {
    super(
      'CONVERGE_INCOMPATIBLE_SCHEMA_VERSION',
      `${eventType} schemaVersion ${schemaVersion} is not read by live consumer(s) ${consumers.join(', ')}: roll them out first (converge compat)`,
    );
  }
}

/** A quarantine replay or discard (or `dlq show`) named an id that has no quarantine row. */
export class QuarantineNotFoundError extends ConvergeError {
  constructor(readonly id: string) {
    super('CONVERGE_QUARANTINE_NOT_FOUND', `no quarantined message ${id}`);
  }
}

/**
 * A quarantine replay or discard named a row that is already closed. `resolution` is how it was
 * closed when known; without it the row was closed by someone else between the read and the write.
 */
export class QuarantineResolvedError extends ConvergeError {
  constructor(
    readonly id: string,
    readonly resolution?: string,
  ) {
    super(
      'CONVERGE_QUARANTINE_RESOLVED',
      resolution
        ? `quarantined message ${id} was already ${resolution}`
        : `quarantined message ${id} was closed by someone else meanwhile`,
    );
  }
}

/**
 * A payload does not match the schema its event type has in the event catalog (defineEvents),
 * at the producer (nothing is written) or at the consumer (quarantined as `invalid-envelope`,
 * never applied). `paths` are where the schema failed; segments that are not plain names or
 * indices (a record key may be personal data) show as `*`. Values and the schema's own
 * messages (some quote the value) never appear.
 */
export class PayloadValidationError extends EnvelopeValidationError {
  constructor(
    readonly eventType: string,
    readonly paths: readonly string[],
  ) {
    super(
      'payload',
      `does not match the ${eventType} schema at ${paths.map((p) => `"${p}"`).join(', ')}`,
      'CONVERGE_INVALID_PAYLOAD',
    );
  }
}

/** What a projection write was about: one event (applyIncrement, applySnapshot) or a batch. */
export type WrittenFor =
  { aggregateType: string; aggregateId: string; version: number } | { aggregates: number; events: number };

/**
 * A projection helper's write callback changed fewer rows than the events it applied need:
 * typically an UPDATE of a read-model row that does not exist yet (an aggregate's first event).
 * Thrown before commit and reported like a version gap, so the consumer rolls the whole
 * transaction back (inbox row and projection version included) even if the handler catches it.
 */
export class NoRowsWrittenError extends ConvergeError {
  constructor(
    readonly projection: string,
    readonly rowCount: number,
    readonly expected: number,
    readonly writtenFor: WrittenFor,
  ) {
    const what =
      'aggregates' in writtenFor
        ? `the batch write of ${writtenFor.events} events (${writtenFor.aggregates} aggregates)`
        : `the write of ${writtenFor.aggregateType}/${writtenFor.aggregateId} version ${writtenFor.version}`;
    super(
      'CONVERGE_NO_ROWS_WRITTEN',
      `${what} in ${projection} changed ${rowCount} rows, expected at least ${expected}: ` +
        "write an aggregate's first event with an upsert (INSERT ... ON CONFLICT DO UPDATE), " +
        "or return 'unchanged' when the event leaves the read model as it is",
    );
  }
}

/**
 * `waitForVersion` gave up: the projection had not applied the aggregate at `version` within
 * `timeoutMs`. Names the aggregate and versions, never read-model contents.
 */
export class FreshnessTimeoutError extends ConvergeError {
  constructor(
    readonly projection: string,
    readonly aggregateType: string,
    readonly aggregateId: string,
    readonly version: number,
    readonly appliedVersion: number,
    readonly timeoutMs: number,
  ) {
    super(
      'CONVERGE_FRESHNESS_TIMEOUT',
      `${projection} had not applied ${aggregateType}/${aggregateId} version ${version} after ${timeoutMs} ms (applied: ${appliedVersion})`,
    );
  }
}
