import { z } from 'zod';
import { EnvelopeValidationError } from '../errors.js';
import type { EventEnvelope } from './envelope.js';

export const DEFAULT_MAX_ENVELOPE_BYTES = 256 * 1024;

const name = z.string().min(1).max(200).regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : - only');
const text = z.string().min(1).max(200);
const positiveInt = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const envelopeSchema = z.strictObject({
  eventId: text,
  aggregateType: name,
  aggregateId: text,
  aggregateVersion: positiveInt,
  eventType: name,
  schemaVersion: positiveInt,
  kind: z.enum(['incremental', 'snapshot']),
  payload: z.unknown().refine((value) => value !== undefined, 'required'),
  occurredAt: z.iso.datetime({ offset: true }),
  traceparent: z.string().regex(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/, 'W3C traceparent').optional(),
  tenantId: text.optional(),
});

/**
 * Checks a parsed value against the envelope contract. The error names the first bad
 * field and what is wrong with it; zod's own messages are not forwarded because some
 * of them quote the received value.
 */
export function validateEnvelope(value: unknown): EventEnvelope {
  const result = envelopeSchema.safeParse(value);
  if (result.success) return result.data as EventEnvelope;
  const issue = result.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.join('.') : issue?.code === 'unrecognized_keys' ? String((issue as { keys?: string[] }).keys?.[0] ?? '(root)') : '(root)';
  throw new EnvelopeValidationError(field, describeIssue(issue));
}

function describeIssue(issue: z.core.$ZodIssue | undefined): string {
  switch (issue?.code) {
    case 'invalid_type':
      return `expected ${issue.expected}`;
    case 'too_small':
      return issue.inclusive === false ? `must be greater than ${String(issue.minimum)}` : `must be at least ${String(issue.minimum)}`;
    case 'too_big':
      return issue.inclusive === false ? `must be less than ${String(issue.maximum)}` : `must be at most ${String(issue.maximum)}`;
    case 'invalid_format':
      return `not a valid ${issue.format}`;
    case 'invalid_value':
      return `not one of the allowed values`;
    case 'unrecognized_keys':
      return 'unknown field';
    case 'custom':
      return 'required';
    default:
      return 'invalid';
  }
}

/** Parses a received body, enforcing the size limit before JSON parsing touches it. */
export function parseEnvelope(body: Buffer, maxBytes = DEFAULT_MAX_ENVELOPE_BYTES): EventEnvelope {
  if (body.length > maxBytes) throw new EnvelopeValidationError('(body)', `${body.length} bytes exceeds limit of ${maxBytes}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new EnvelopeValidationError('(body)', 'not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new EnvelopeValidationError('(body)', 'expected a JSON object');
  }
  return validateEnvelope(parsed);
}
