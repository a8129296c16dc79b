import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import type { Executor } from '../db/executor.js';
import { QuarantineNotFoundError, QuarantineResolvedError } from '../runtime/errors.js';
import { decodeProperties, type ReplayOutcome } from '../inbox/index.js';
import { z } from 'zod';
import { inboxScopeOption } from '../runtime/option-fields.js';
import { defineOptions, schemaOption } from '../runtime/options.js';
import { opsSql } from './sql.js';
import {
  REDACTED,
  SENSITIVE_HEADER,
  decodeSensitivePaths,
  redactPaths,
  scrubText,
  sensitiveValues,
} from '../envelope/redact.js';

export const quarantineFilterOptions = defineOptions(
  'listQuarantine',
  z.strictObject({
    schema: schemaOption,
    consumer: inboxScopeOption.optional().describe('Only this consumer (inbox scope).'),
    reason: z.string().min(1).optional().describe('Only this reason, e.g. handler-failed.'),
    eventType: z
      .string()
      .min(1)
      .optional()
      .describe("Only this eventType (the AMQP type property, which converge's relay sets)."),
    olderThanMs: z.number().int().min(0).default(0).describe('Only rows at least this old, in ms.'),
    includeResolved: z.boolean().default(false).describe('Include replayed and discarded rows.'),
    limit: z.number().int().min(1).max(100_000).default(100).describe('Most rows, newest first.'),
  }),
);

/** The id of a quarantine row, as `dlq list` shows it. */
export const quarantineIdOption = z.string().min(1);

export const showQuarantinedOptions = defineOptions('showQuarantined', z.strictObject({ schema: schemaOption }));

export const discardQuarantinedOptions = defineOptions(
  'discardQuarantined',
  z.strictObject({
    id: quarantineIdOption.describe('Id of the open quarantined message to close.'),
    reason: z
      .string()
      .refine((reason) => reason.trim() !== '', 'a discard needs a reason, which is recorded')
      .describe('Why it is discarded; required, recorded as the resolution note.'),
    schema: schemaOption,
  }),
);

export type DiscardQuarantinedOptions = z.input<typeof discardQuarantinedOptions.schema>;

export type QuarantineFilter = z.input<typeof quarantineFilterOptions.schema>;

export interface QuarantineSummary {
  id: string;
  consumer: string;
  eventId: string | null;
  reason: string;
  detail: string;
  routingKey: string | null;
  quarantinedAt: Date;
  ageSeconds: number;
  bodyBytes: number;
  resolvedAt: Date | null;
  resolution: 'replayed' | 'discarded' | null;
  resolutionNote: string | null;
  /** What the consumer did with the replayed message; null until it settled (or if never replayed). */
  replayOutcome: ReplayOutcome | null;
  replayOutcomeAt: Date | null;
  /** The open row a replay that failed again landed in. */
  replayQuarantineId: string | null;
}

export interface QuarantinedMessage extends Omit<QuarantineSummary, 'ageSeconds' | 'bodyBytes'> {
  exchange: string | null;
  properties: Record<string, unknown> & { headers?: Record<string, unknown> };
  body: Buffer;
}

/** Quarantined messages, newest first, without their bodies. */
export async function listQuarantine(executor: Executor, input: QuarantineFilter = {}): Promise<QuarantineSummary[]> {
  const filter = quarantineFilterOptions.parse(input);
  const sql = opsSql(schemaRef(filter.schema));
  const { rows } = await executor.query<Record<string, unknown>>(sql.listQuarantine, [
    filter.consumer ?? null,
    filter.reason ?? null,
    filter.eventType ?? null,
    filter.olderThanMs,
    filter.includeResolved,
    filter.limit,
  ]);
  return rows.map((row) => ({
    ...summary(row),
    ageSeconds: Number(row.age_seconds),
    bodyBytes: Number(row.body_bytes),
  }));
}

/** One quarantined message with its raw body and properties, for a person to inspect. */
export async function showQuarantined(
  executor: Executor,
  id: string,
  options: z.input<typeof showQuarantinedOptions.schema> = {},
): Promise<QuarantinedMessage | null> {
  const { schema } = showQuarantinedOptions.parse(options);
  return readQuarantined(executor, schemaRef(schema), id);
}

async function readQuarantined(executor: Executor, schema: SchemaRef, id: string): Promise<QuarantinedMessage | null> {
  const { rows } = await executor.query<Record<string, unknown>>(opsSql(schema).quarantined, [id]);
  const row = rows[0];
  if (!row) return null;
  return {
    ...summary(row),
    exchange: (row.exchange as string | null) ?? null,
    // Exact even when a header holds U+0000, which the jsonb copy cannot (see stored-properties.ts).
    properties: decodeProperties(
      row.properties_exact as string | null,
      row.properties as QuarantinedMessage['properties'],
    ),
    body: row.body as Buffer,
  };
}

/**
 * How a display masked a quarantined message: `paths` masked the fields its producer declared
 * sensitive, `payload` the whole payload (the message says nothing about its fields: no catalog,
 * or an older producer), `body` the whole body (not a JSON envelope), `none` nothing (asked for).
 */
export type Masking = 'paths' | 'payload' | 'body' | 'none';

/** A quarantined message as a person sees it: the body as text, personal data masked unless asked for. */
export interface QuarantineDisplay extends Omit<QuarantinedMessage, 'body'> {
  bodyBytes: number;
  body: string;
  masking: Masking;
  /** The payload paths masked (those the producer declared), when masking is `paths`. */
  sensitivePaths?: string[];
}

/**
 * The body and detail of a quarantined message for a display (`dlq show`, the dashboard): the
 * payload fields named by the message's `x-converge-sensitive` header become "[redacted]", and so
 * does any of their values a handler copied into the detail. A message without that header, or
 * one whose header cannot be read, has its whole payload masked; a body that is not a JSON object,
 * all of it. `showSensitive` shows everything as stored.
 */
export function displayQuarantined(
  message: QuarantinedMessage,
  options: { showSensitive?: boolean } = {},
): QuarantineDisplay {
  const { body, ...rest } = message;
  const shown = { ...rest, bodyBytes: body.length };
  if (options.showSensitive) return { ...shown, body: body.toString('utf8'), masking: 'none' };
  const parsed = parseObject(body);
  if (parsed === undefined) return { ...shown, body: REDACTED, masking: 'body' };
  const paths = decodeSensitivePaths(message.properties.headers?.[SENSITIVE_HEADER]);
  const values = sensitiveValues(parsed.payload, paths);
  const detail = scrubText(message.detail, values);
  if (paths === undefined) {
    const masked = 'payload' in parsed ? { ...parsed, payload: REDACTED } : REDACTED;
    return { ...shown, detail, body: typeof masked === 'string' ? masked : JSON.stringify(masked), masking: 'payload' };
  }
  const masked = { ...parsed, payload: redactPaths(parsed.payload, paths) };
  return { ...shown, detail, body: JSON.stringify(masked), masking: 'paths', sensitivePaths: paths };
}

function parseObject(body: Buffer): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(body.toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Closes an open quarantined message without processing it; the reason is required and kept. */
export async function discardQuarantined(executor: Executor, input: DiscardQuarantinedOptions): Promise<void> {
  const options = discardQuarantinedOptions.parse(input);
  const schema = schemaRef(options.schema);
  await openRow(executor, options.id, schema);
  await resolve(executor, options.id, 'discarded', options.reason, schema, null);
}

export async function openRow(executor: Executor, id: string, schema: SchemaRef): Promise<QuarantinedMessage> {
  const message = await readQuarantined(executor, schema, id);
  if (!message) throw new QuarantineNotFoundError(id);
  if (message.resolvedAt) throw new QuarantineResolvedError(id, message.resolution ?? undefined);
  return message;
}

export async function resolve(
  executor: Executor,
  id: string,
  resolution: 'replayed' | 'discarded',
  note: string,
  schema: SchemaRef,
  replayToken: string | null,
): Promise<void> {
  const { rows } = await executor.query(opsSql(schema).resolveQuarantine, [id, resolution, note, replayToken]);
  if (rows.length === 0) throw new QuarantineResolvedError(id);
}

function summary(row: Record<string, unknown>): Omit<QuarantineSummary, 'ageSeconds' | 'bodyBytes'> {
  return {
    id: String(row.id),
    consumer: row.consumer as string,
    eventId: (row.event_id as string | null) ?? null,
    reason: row.reason as string,
    detail: row.detail as string,
    routingKey: (row.routing_key as string | null) ?? null,
    quarantinedAt: row.quarantined_at as Date,
    resolvedAt: (row.resolved_at as Date | null) ?? null,
    resolution: (row.resolution as QuarantineSummary['resolution']) ?? null,
    resolutionNote: (row.resolution_note as string | null) ?? null,
    replayOutcome: (row.replay_outcome as ReplayOutcome | null) ?? null,
    replayOutcomeAt: (row.replay_outcome_at as Date | null) ?? null,
    replayQuarantineId:
      row.replay_quarantine_id == null ? null : (row.replay_quarantine_id as string | number).toString(),
  };
}
