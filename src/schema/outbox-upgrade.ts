import type { SchemaRef } from '../runtime/identifier.js';
import { outboxBlankChecks, outboxEnvelopeChecks } from './outbox-checks.js';

/** The last_error prefix of a row the table's rules refuse: the relay and migration 17 both write it. */
export const ROW_REFUSED = 'CONVERGE_OUTBOX_ROW_REFUSED';

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
