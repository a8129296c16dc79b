import { ENVELOPE_LIMITS } from '../envelope/validate.js';

const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/**
 * The envelope rules as outbox CHECK constraints: [constraint name, condition]. Derived from
 * the limits the consumer validates with, so the table refuses what every consumer would
 * reject; rows from before these checks existed are caught by the relay's own validation.
 * Migration 11 applied these once; changing a limit needs a new migration that re-adds them.
 */
export function outboxEnvelopeChecks(): [string, string][] {
  const { nameMaxLength, namePattern, textMaxLength, maxVersion, traceparentPattern } = ENVELOPE_LIMITS;
  const name = (column: string) => `${column} ~ ${literal(namePattern)} AND char_length(${column}) <= ${nameMaxLength}`;
  const text = (column: string) => `char_length(${column}) BETWEEN 1 AND ${textMaxLength}`;
  return [
    ['outbox_envelope_event_id', text('event_id')],
    ['outbox_envelope_aggregate_type', name('aggregate_type')],
    ['outbox_envelope_aggregate_id', text('aggregate_id')],
    ['outbox_envelope_aggregate_version', `aggregate_version <= ${maxVersion}`],
    ['outbox_envelope_event_type', name('event_type')],
    ['outbox_envelope_tenant_id', `tenant_id IS NULL OR ${text('tenant_id')}`],
    // Date.toISOString writes years outside 0000-9999 as ±YYYYYY, which is not the ISO date-time the
    // consumer accepts; year 0 (1 BC) is refused too, to keep the bound simple.
    [
      'outbox_envelope_occurred_at',
      `occurred_at >= '0001-01-01 00:00:00+00' AND occurred_at < '10000-01-01 00:00:00+00'`,
    ],
    ['outbox_envelope_traceparent', `traceparent IS NULL OR traceparent ~ ${literal(traceparentPattern)}`],
  ];
}

/**
 * The code points JavaScript's String.prototype.trim removes (WhiteSpace and LineTerminator):
 * the consumer calls an id blank when trim leaves nothing, so the table must use the same set,
 * not PostgreSQL's locale-dependent [[:space:]]. test/unit/outbox-checks.test.ts holds it to trim.
 */
export const TRIMMED_CODE_POINTS: readonly (readonly [number, number])[] = [
  [0x0009, 0x000d],
  [0x0020, 0x0020],
  [0x00a0, 0x00a0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
];

/** A PostgreSQL regular expression (ARE) matching a string of only those code points (or none). */
export function blankPattern(): string {
  const hex = (codePoint: number) => `\\u${codePoint.toString(16).padStart(4, '0')}`;
  const ranges = TRIMMED_CODE_POINTS.map(([from, to]) => (from === to ? hex(from) : `${hex(from)}-${hex(to)}`));
  return `^[${ranges.join('')}]*$`;
}

/**
 * Blank ids (empty or only whitespace) as outbox CHECK constraints, as the consumer rejects
 * them; added by migration 12. U+0000 needs no check: text and jsonb cannot hold it at all.
 */
export function outboxBlankChecks(): [string, string][] {
  const notBlank = (column: string) => `${column} !~ ${literal(blankPattern())}`;
  return [
    ['outbox_envelope_event_id_not_blank', notBlank('event_id')],
    ['outbox_envelope_aggregate_id_not_blank', notBlank('aggregate_id')],
    ['outbox_envelope_tenant_id_not_blank', `tenant_id IS NULL OR ${notBlank('tenant_id')}`],
  ];
}
