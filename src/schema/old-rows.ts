import type { SchemaRef } from '../runtime/identifier.js';
import { ROW_REFUSED } from '../runtime/row-refused.js';
import { outboxBlankChecks, outboxEnvelopeChecks } from './outbox-checks.js';

/**
 * Migration 17. Migrations 11 and 12 added the envelope checks NOT VALID, and PostgreSQL checks a
 * NOT VALID constraint on every row an UPDATE touches: one old pending row breaking a rule made the
 * relay's claim fail for the whole outbox. The rules now bind pending rows only (a published or
 * failed row is history, and marking it failed must always be possible), the pending rows that break
 * one are marked failed with the constraint named, and the checks are validated, so no old row is
 * left that a later UPDATE could trip over.
 *
 * Cost: the mark reads only pending rows (outbox_pending_idx); the validation is one sequential scan
 * for all checks together, cut short at `status <> 'pending'` for history (docs/operations.md).
 */
export function outboxPendingChecks(s: SchemaRef): string[] {
  const checks = [...outboxEnvelopeChecks(), ...outboxBlankChecks()];
  const outbox = `${s.quoted}.outbox`;
  const broken = checks.map(([name, check]) => [name, `(${check}) IS FALSE`] as const);
  return [
    // First, so that marking a row failed is not itself refused by the old unconditional check.
    `ALTER TABLE ${outbox} ${checks.map(([name]) => `DROP CONSTRAINT IF EXISTS ${name}`).join(', ')}`,
    `UPDATE ${outbox}
        SET status = 'failed', claimed_by = NULL, claim_expires_at = NULL,
            last_error = CASE ${broken
              .map(([name, test]) => `WHEN ${test} THEN '${ROW_REFUSED}: constraint ${name} (migration 17)'`)
              .join(' ')} END
      WHERE status = 'pending' AND (${broken.map(([, test]) => test).join(' OR ')})`,
    // Added valid in one ALTER: PostgreSQL checks all of them in a single scan of the table.
    `ALTER TABLE ${outbox} ${checks
      .map(([name, check]) => `ADD CONSTRAINT ${name} CHECK (status <> 'pending' OR (${check}))`)
      .join(', ')}`,
  ];
}

/**
 * Migration 8's plan for rows from before it. Until then every quarantine of a message added a row,
 * so a redelivered message could have several open rows, and the unique index that makes a repeat
 * update the open row failed with 23505: `converge migrate` could not pass migration 8 at all. The
 * newest open row of each message stays open and counts the others (first seen, last seen, how
 * often); the others are closed as repeats of it, kept for the record, never deleted.
 */
export function mergeOpenQuarantineRepeats(s: SchemaRef): string {
  const quarantine = `${s.quoted}.quarantine`;
  return `WITH ranked AS (
      SELECT id, max(id) OVER w AS keep, count(*) OVER w AS n, min(quarantined_at) OVER w AS first_at
        FROM ${quarantine}
       WHERE resolved_at IS NULL AND event_id IS NOT NULL AND fingerprint IS NOT NULL
      WINDOW w AS (PARTITION BY consumer, event_id, fingerprint)
    ), kept AS (
      UPDATE ${quarantine} q SET times_seen = r.n, last_seen_at = q.quarantined_at, quarantined_at = r.first_at
        FROM ranked r WHERE q.id = r.id AND r.id = r.keep AND r.n > 1
    )
    UPDATE ${quarantine} q
       SET resolved_at = now(), resolution = 'discarded',
           resolution_note = 'repeat of quarantine row ' || r.keep || ', merged into it by migration 8'
      FROM ranked r WHERE q.id = r.id AND r.id <> r.keep`;
}
