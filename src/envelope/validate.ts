import { z } from 'zod';
import { BodyTooLargeError, EnvelopeValidationError, MalformedBodyError } from '../runtime/errors.js';
import type { EventEnvelope } from './envelope.js';
import { isFiniteThroughout, plainPayload, storableInstant, storableText, storableThroughout } from './storable.js';

export const DEFAULT_MAX_ENVELOPE_BYTES = 256 * 1024;

/**
 * Most nested objects/arrays in a whole received body (the envelope itself is level 1, its
 * payload level 2). Deeper bodies are rejected before JSON.parse: fingerprinting and
 * handlers walk the value recursively and would overflow the stack on a hostile body.
 */
export const MAX_JSON_DEPTH = 64;

// fatal: invalid UTF-8 is rejected instead of silently becoming U+FFFD (which would change
// the content, and so the fingerprint, of what the producer sent). ignoreBOM keeps a BOM in
// the text, where JSON.parse rejects it as before.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The envelope's limits, shared with the outbox table's check constraints (migration 11) so
 * the table refuses what a consumer would reject. Lengths count characters (code points), as
 * zod and PostgreSQL's char_length both do.
 */
export const ENVELOPE_LIMITS = {
  /** aggregateType and eventType. */
  nameMaxLength: 200,
  /** ASCII only, so it means the same in JavaScript and in a PostgreSQL regular expression. */
  namePattern: '^[A-Za-z0-9_.:-]+$',
  /** eventId, aggregateId, tenantId. */
  textMaxLength: 200,
  /** aggregateVersion and schemaVersion: the JSON number must stay an exact integer in JavaScript. */
  maxVersion: Number.MAX_SAFE_INTEGER,
  traceparentPattern: '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$',
} as const;

const name = z
  .string()
  .min(1)
  .max(ENVELOPE_LIMITS.nameMaxLength)
  .regex(new RegExp(ENVELOPE_LIMITS.namePattern), 'letters, digits, _ . : - only');
/**
 * Ids and other free text go to PostgreSQL text columns (inbox, projection state), which
 * cannot hold U+0000, and the pg driver would turn a lone surrogate into U+FFFD, changing the
 * id on its way in. A blank id names nothing a person could look up. The outbox's checks
 * (migration 11) do not test these two; the relay's validation of each claimed row does.
 */
const text = z
  .string()
  .min(1)
  .max(ENVELOPE_LIMITS.textMaxLength)
  .refine((value) => value.trim() !== '', 'blank')
  .refine(storableText, 'unstorable');
const positiveInt = z.number().int().positive().max(ENVELOPE_LIMITS.maxVersion);

const envelopeSchema = z.strictObject({
  eventId: text,
  aggregateType: name,
  aggregateId: text,
  aggregateVersion: positiveInt,
  eventType: name,
  schemaVersion: positiveInt,
  kind: z.enum(['incremental', 'snapshot']),
  payload: z.unknown().refine((value) => value !== undefined, 'required'),
  occurredAt: z.iso.datetime({ offset: true }).refine(storableInstant, 'instant'),
  traceparent: z.string().regex(new RegExp(ENVELOPE_LIMITS.traceparentPattern), 'W3C traceparent').optional(),
  tenantId: text.optional(),
});

/**
 * Checks a parsed value against the envelope contract. The error names the first bad
 * field and what is wrong with it; zod's own messages are not forwarded because some
 * of them quote the received value.
 */
export function validateEnvelope(value: unknown): EventEnvelope {
  return fastValidated(value) ?? slowValidated(value);
}

/**
 * The whole contract through zod and the two payload walks: what decides an envelope the fast
 * path leaves, and the only path that says what is wrong. Exported for the differential tests.
 */
export function slowValidated(value: unknown): EventEnvelope {
  const data = schemaChecked(value);
  if (!storableThroughout(data.payload))
    throw new EnvelopeValidationError(
      'payload',
      'holds U+0000 or a lone surrogate, which PostgreSQL text cannot store',
    );
  // 1e400 parses to Infinity, which JSON.stringify writes back as null: the event would change on the way through.
  if (!isFiniteThroughout(data.payload))
    throw new EnvelopeValidationError('payload', 'holds a number outside the range of a double');
  return data;
}

// The pattern zod builds for envelopeSchema's occurredAt, tested without zod's result objects.
const OCCURRED_AT = z.regexes.datetime({ offset: true, local: false, precision: null });
const TRACEPARENT = new RegExp(ENVELOPE_LIMITS.traceparentPattern);
const NAME = new RegExp(ENVELOPE_LIMITS.namePattern);

/**
 * The common case without zod, which took a third of a consumer's CPU per delivery, and with
 * one walk of the payload instead of two: an envelope that passes every check below passes
 * slowValidated too (each check implies one of its own), and comes back as zod returns it (a
 * new object, keys in the schema's order, payload as given). Anything else, odd but valid
 * included, returns undefined and goes the slow way. Exported for the differential tests.
 */
export function fastValidated(value: unknown): EventEnvelope | undefined {
  // A plain object (as JSON.parse makes): zod also looks at inherited keys, which this check leaves to it.
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype)
    return undefined;
  const v = value as Record<string, unknown>;
  for (const key in v) if (!envelopeKey(key) || v[key] === undefined) return undefined;
  const { eventId, aggregateType, aggregateId, aggregateVersion, eventType, schemaVersion, kind, payload, occurredAt } =
    v;
  if (
    !plainText(eventId) ||
    !plainName(aggregateType) ||
    !plainText(aggregateId) ||
    !plainVersion(aggregateVersion) ||
    !plainName(eventType) ||
    !plainVersion(schemaVersion) ||
    (kind !== 'incremental' && kind !== 'snapshot') ||
    !plainPayload(payload) ||
    typeof occurredAt !== 'string' ||
    !OCCURRED_AT.test(occurredAt) ||
    !storableInstant(occurredAt)
  )
    return undefined;
  const envelope: EventEnvelope = {
    eventId,
    aggregateType,
    aggregateId,
    aggregateVersion,
    eventType,
    schemaVersion,
    kind,
    payload,
    occurredAt,
  };
  if ('traceparent' in v) {
    if (typeof v.traceparent !== 'string' || !TRACEPARENT.test(v.traceparent)) return undefined;
    envelope.traceparent = v.traceparent;
  }
  if ('tenantId' in v) {
    if (!plainText(v.tenantId)) return undefined;
    envelope.tenantId = v.tenantId;
  }
  return envelope;
}

/**
 * The keys of envelopeSchema, spelled out: a switch costs half of what Set lookups did (about
 * 30 of the fast path's 400 ns). A key missing here only sends its envelopes the slow way.
 */
function envelopeKey(key: string): boolean {
  switch (key) {
    case 'eventId':
    case 'aggregateType':
    case 'aggregateId':
    case 'aggregateVersion':
    case 'eventType':
    case 'schemaVersion':
    case 'kind':
    case 'payload':
    case 'occurredAt':
    case 'traceparent':
    case 'tenantId':
      return true;
    default:
      return false;
  }
}

/** At most nameMaxLength UTF-16 units: then also at most that many code points, zod's measure. */
function plainName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= ENVELOPE_LIMITS.nameMaxLength && NAME.test(value);
}

function plainText(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length > 0 &&
    value.length <= ENVELOPE_LIMITS.textMaxLength &&
    value.trim() !== '' &&
    storableText(value)
  );
}

function plainVersion(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

function schemaChecked(value: unknown): EventEnvelope {
  const result = envelopeSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field =
      issue && issue.path.length > 0
        ? issue.path.join('.')
        : issue?.code === 'unrecognized_keys'
          ? String((issue as { keys?: string[] }).keys?.[0] ?? '(root)')
          : '(root)';
    throw new EnvelopeValidationError(field, describeIssue(issue));
  }
  return result.data;
}

function describeIssue(issue: z.core.$ZodIssue | undefined): string {
  switch (issue?.code) {
    case 'invalid_type':
      return `expected ${issue.expected}`;
    case 'too_small':
      return issue.inclusive === false
        ? `must be greater than ${String(issue.minimum)}`
        : `must be at least ${String(issue.minimum)}`;
    case 'too_big':
      return issue.inclusive === false
        ? `must be less than ${String(issue.maximum)}`
        : `must be at most ${String(issue.maximum)}`;
    case 'invalid_format':
      // The message of a pattern is the schema's hint (e.g. 'W3C traceparent'), never the value.
      return issue.format === 'regex' ? `does not match the pattern (${issue.message})` : `not a valid ${issue.format}`;
    case 'invalid_value':
      return `not one of the allowed values`;
    case 'unrecognized_keys':
      return 'unknown field';
    case 'custom':
      if (issue.message === 'blank') return 'must not be blank or only whitespace';
      if (issue.message === 'unstorable') return 'holds U+0000 or a lone surrogate, which PostgreSQL text cannot store';
      if (issue.message === 'instant') return 'outside the years 0001 to 9999 (PostgreSQL timestamptz has no year 0)';
      return 'required';
    default:
      return 'invalid';
  }
}

/**
 * Parses a received body: size limit first (a 10 MiB body is never decoded), then strict
 * UTF-8, nesting depth, JSON, object shape, and the envelope contract. Whatever is wrong
 * with the body as a whole is a MalformedBodyError or BodyTooLargeError; a bad field is an
 * EnvelopeValidationError naming it.
 */
export function parseEnvelope(body: Buffer, maxBytes = DEFAULT_MAX_ENVELOPE_BYTES): EventEnvelope {
  if (body.length > maxBytes) throw new BodyTooLargeError(body.length, maxBytes);
  if (body.length === 0) throw new MalformedBodyError('not valid JSON: empty body');
  const text = decodeUtf8(body);
  if (nestingExceeds(body, MAX_JSON_DEPTH)) throw new MalformedBodyError(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new MalformedBodyError('not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new MalformedBodyError('expected a JSON object');
  return validateEnvelope(parsed);
}

function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new MalformedBodyError('not valid UTF-8');
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * True if objects/arrays nest deeper than `limit` anywhere in a JSON text, as UTF-8 bytes.
 * One pass, skipping string contents, no allocation (about 2 ns a byte, under half of what
 * JSON.parse takes for a 1 KB body), and before the parser builds a deep value. Bytes are
 * safe to scan: no byte of a multi-byte UTF-8 sequence is below 0x80, so every quote,
 * backslash and bracket seen is a real one. Unbalanced text is left to JSON.parse.
 */
export function nestingExceeds(json: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
