import { InvalidIdentifierError } from './errors.js';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Schema and table names are spliced into SQL text, so they are restricted to plain
 * lower-case identifiers and always double-quoted, even though the pattern already excludes quotes.
 */
export function quoteIdentifier(name: string, field?: string): string {
  if (!IDENTIFIER.test(name)) throw new InvalidIdentifierError(name, field);
  return `"${name}"`;
}

export function isValidIdentifier(name: string): boolean {
  return IDENTIFIER.test(name);
}
