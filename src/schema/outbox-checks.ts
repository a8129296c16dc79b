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
