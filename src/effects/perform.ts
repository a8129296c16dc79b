import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import type { Executor } from '../db/executor.js';
import { runStatement } from '../db/statement.js';
import { backoffDelay, type BackoffPolicy } from '../runtime/backoff.js';

import { ConvergeError, PermanentError } from '../runtime/errors.js';
import { schemaRef } from '../runtime/identifier.js';
import {
  backoffOption,
  defineOptions,
  faultHooksOption,
  functionOption,
  hookOption,
  signalOption,
  type OptionsInput,
  schemaOption,
} from '../runtime/options.js';
import { idempotencyKey, validEffectName } from './key.js';
import { effectsSql } from './sql.js';

const DEFAULT_EFFECT_BACKOFF: BackoffPolicy = { initialDelayMs: 500, maxDelayMs: 30_000, factor: 2 };

const eventOption = z
  .custom<{ eventId: string }>(
    (v) => typeof v === 'object' && v !== null && typeof (v as { eventId?: unknown }).eventId === 'string',
    'must be the event (an object with its eventId)',
  )
  .meta({ typeName: '{ eventId: string }' });

const effectName = z.string().refine((name) => {
  try {
    return validEffectName(name) === name;
  } catch {
    return false;
  }
}, 'must be 1-100 characters of letters, digits and _ . : - starting with a letter or digit');

/** Which effect of which event: what readEffect and retryFailedEffect look up. */
const effectRefShape = {
  schema: schemaOption,
  event: eventOption.describe("The event the effect belongs to: anything with its `eventId` (the handler's event)."),
  effect: effectName.describe('Name of the effect (`send-sms`); with the eventId it makes the idempotency key.'),
};

export const effectOptions = defineOptions(
  'performEffect',
  z.strictObject({
    ...effectRefShape,
    call: functionOption<(key: string, signal: AbortSignal) => Promise<unknown>>(
      '(key: string, signal: AbortSignal) => Promise<R>',
    ).describe(
      "The remote call. Must send `key` as the remote's idempotency key; its JSON result is recorded. Throw PermanentError for a failure that no repeat can fix.",
    ),
    maxCalls: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(3)
      .describe('Calls in this run before a retryable failure is thrown to the caller (the consumer retries later).'),
    backoff: backoffOption(DEFAULT_EFFECT_BACKOFF).describe('Wait between calls after a retryable failure.'),
    timeoutMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe('One call longer than this is aborted and counts as a retryable failure.'),
    signal: signalOption.optional().describe('Aborts the call and the wait between calls (shutdown).'),
    hooks: faultHooksOption({
      afterCall: hookOption<(key: string) => void | Promise<void>>(
        '(key: string) => void | Promise<void>',
        'After the remote call returned, before its result is recorded (fault injection: the crash window).',
      ),
    }),
  }),
);

export const effectRefOptions = defineOptions('readEffect', z.strictObject(effectRefShape));

/** `R` is what `call` resolves to; it is stored as JSON and returned as read back. */
export type EffectOptions<R = unknown> = Omit<OptionsInput<typeof effectOptions>, 'call'> & {
  call: (key: string, signal: AbortSignal) => Promise<R>;
};
export type EffectRef = OptionsInput<typeof effectRefOptions>;

export type EffectStatus = 'pending' | 'completed' | 'failed';

/** One row of the effects table. `error` is the kind of the last failure (a code or class name), never its message. */
export interface EffectRecord<R = unknown> {
  key: string;
  effect: string;
  eventId: string;
  status: EffectStatus;
  result: R | null;
  error: string | null;
  /** Calls made for this key, over all runs. */
  attempts: number;
  firstCalledAt: Date;
  lastCalledAt: Date;
  completedAt: Date | null;
}

/**
 * What performEffect ended with. `calledNow`: whether this run called the remote; false when the
 * key's outcome was recorded before (a redelivery) and is returned without a call.
 */
export type EffectOutcome<R = unknown> =
  | { status: 'completed'; key: string; result: R | null; attempts: number; calledNow: boolean }
  | { status: 'failed'; key: string; error: string; attempts: number; calledNow: boolean };

interface EffectRow {
  key: string;
  effect: string;
  event_id: string;
  status: EffectStatus;
  result: unknown;
  error: string | null;
  attempts: number;
  first_called_at: Date;
  last_called_at: Date;
  completed_at: Date | null;
}

/**
 * Performs one remote effect of an event at most once in effect: the call carries the key from
 * idempotencyKey(event, effect), and its outcome is recorded in the effects table. A key with a
 * recorded outcome (completed or failed) is never called again. The attempt is recorded before
 * the call and the outcome after it, each committed on its own: pass a pool, not the consumer's
 * transaction, so that a crash between the call and the record leaves the key pending and the
 * next run repeats the call with the same key, which the remote must deduplicate.
 *
 * A PermanentError from `call` is recorded as failed and returned (kept for a person:
 * retryFailedEffect). Any other error is retryable: the call is repeated after a backoff up to
 * `maxCalls` times, then the error is thrown and the key stays pending for the next delivery.
 * Nothing is logged; the error column keeps a code or class name, never a message.
 */
export async function performEffect<R>(executor: Executor, input: EffectOptions<R>): Promise<EffectOutcome<R>> {
  const options = effectOptions.parse(input);
  const sql = effectsSql(schemaRef(options.schema));
  const key = idempotencyKey(options.event, options.effect);
  for (let calls = 1; ; calls++) {
    const begun = await runStatement<EffectRow>(executor, sql.begin, [key, options.effect, options.event.eventId]);
    if (begun.rows.length === 0) return outcomeOf<R>(await readRow(executor, sql.read, key), false);
    let result: unknown;
    try {
      result = await callOnce(options.call, key, options.timeoutMs, options.signal);
    } catch (error) {
      if (error instanceof PermanentError)
        return finish<R>(executor, sql, key, { status: 'failed', result: null, error: errorKind(error) });
      await runStatement(executor, sql.retryable, [key, errorKind(error)]);
      if (calls >= options.maxCalls || options.signal?.aborted) throw error;
      await delay(backoffDelay(calls, options.backoff), undefined, { signal: options.signal });
      continue;
    }
    await options.hooks.afterCall?.(key);
    const json = result === undefined ? null : JSON.stringify(result);
    return finish<R>(executor, sql, key, { status: 'completed', result: json, error: null });
  }
}

/** The record of one effect of one event, or undefined when it was never called. */
export async function readEffect<R = unknown>(
  executor: Executor,
  input: EffectRef,
): Promise<EffectRecord<R> | undefined> {
  const options = effectRefOptions.parse(input);
  const key = idempotencyKey(options.event, options.effect);
  const { rows } = await runStatement<EffectRow>(executor, effectsSql(schemaRef(options.schema)).read, [key]);
  return rows[0] && recordOf<R>(rows[0]);
}

/**
 * A person's decision after fixing what made a call fail for good: the failed key goes back to
 * pending, and the next performEffect for it (a replay or redelivery of the event) calls again
 * with the same key. Returns false when the key is not failed.
 */
export async function retryFailedEffect(executor: Executor, input: EffectRef): Promise<boolean> {
  const options = effectRefOptions.parse(input);
  const key = idempotencyKey(options.event, options.effect);
  const { rows } = await runStatement<EffectRow>(executor, effectsSql(schemaRef(options.schema)).retryFailed, [key]);
  return rows.length > 0;
}

/** The call, bounded by the timeout and the caller's signal even if it ignores the signal it is given. */
async function callOnce(
  call: (key: string, signal: AbortSignal) => Promise<unknown>,
  key: string,
  timeoutMs: number,
  outer: AbortSignal | undefined,
): Promise<unknown> {
  const signal = outer ? AbortSignal.any([outer, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    // A timeout's reason is a DOMException (TimeoutError), the caller's whatever it aborted with.
    onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([call(key, signal), aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}

/** Records the outcome; when a concurrent run recorded one first, that one stands and is returned. */
async function finish<R>(
  executor: Executor,
  sql: ReturnType<typeof effectsSql>,
  key: string,
  outcome: { status: 'completed' | 'failed'; result: string | null; error: string | null },
): Promise<EffectOutcome<R>> {
  const { rows } = await runStatement<EffectRow>(executor, sql.finish, [
    key,
    outcome.status,
    outcome.result,
    outcome.error,
  ]);
  return outcomeOf<R>(rows[0] ?? (await readRow(executor, sql.read, key)), true);
}

async function readRow(executor: Executor, text: string, key: string): Promise<EffectRow> {
  const { rows } = await runStatement<EffectRow>(executor, text, [key]);
  return rows[0]!;
}

function outcomeOf<R>(row: EffectRow, calledNow: boolean): EffectOutcome<R> {
  return row.status === 'failed'
    ? { status: 'failed', key: row.key, error: row.error ?? 'unknown', attempts: row.attempts, calledNow }
    : { status: 'completed', key: row.key, result: row.result as R | null, attempts: row.attempts, calledNow };
}

function recordOf<R>(row: EffectRow): EffectRecord<R> {
  return {
    key: row.key,
    effect: row.effect,
    eventId: row.event_id,
    status: row.status,
    result: row.result as R | null,
    error: row.error,
    attempts: row.attempts,
    firstCalledAt: row.first_called_at,
    lastCalledAt: row.last_called_at,
    completedAt: row.completed_at,
  };
}

/**
 * What kind of failure, for the record and for a person: a converge code, a system code
 * (ECONNRESET) or the error's class name. Never the message, which may quote the request.
 */
export function errorKind(error: unknown): string {
  if (error instanceof ConvergeError) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(code)) return code;
  const name = error instanceof Error ? error.name : typeof error;
  return /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(name) ? name : 'Error';
}
