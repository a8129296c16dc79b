/**
 * A row PostgreSQL refuses to write: an integrity constraint violation (SQLSTATE class 23: a check,
 * a unique key, a foreign key, NOT NULL). For an outbox row that is a fact about the row, not the
 * database: retrying the same statement fails the same way, so the row is set aside as failed with
 * the constraint named, and the rows beside it go on (src/relay, src/cdc, migration 17).
 */

/** The last_error prefix of an outbox row the table's rules refuse. */
export const ROW_REFUSED = 'CONVERGE_OUTBOX_ROW_REFUSED';

interface PgErrorFields {
  code?: unknown;
  constraint?: unknown;
}

/** Whether an error is PostgreSQL refusing a row (class 23), as opposed to the database failing. */
export function isRowRefused(err: unknown): boolean {
  const code = (err as PgErrorFields | null)?.code;
  return typeof code === 'string' && /^23[0-9A-Z]{3}$/.test(code);
}

/** A constraint name fit for a log line or last_error: an identifier, bounded, else left out. */
export function constraintName(err: unknown): string | undefined {
  const name = (err as PgErrorFields | null)?.constraint;
  return typeof name === 'string' && /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/.test(name) ? name : undefined;
}

/**
 * Why a row was refused, for its last_error: the code, the constraint and the SQLSTATE. Never the
 * error's message or detail: PostgreSQL's detail quotes the failing row, payload and all.
 */
export function refusalReason(err: unknown): string {
  const code = String((err as PgErrorFields | null)?.code);
  const name = constraintName(err);
  return `${ROW_REFUSED}: ${name ? `constraint ${name}` : 'an integrity rule'} (SQLSTATE ${code})`;
}
