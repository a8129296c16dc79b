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

declare const schemaRefBrand: unique symbol;

/**
 * A validated schema name in both its forms: `name` for parameters and messages, `quoted`
 * for SQL text. Only schemaRef() makes one, so a plain string (raw or quoted) cannot be
 * passed where SQL is built, and the two forms cannot be mixed up.
 */
export interface SchemaRef {
  readonly name: string;
  readonly quoted: string;
  readonly [schemaRefBrand]: true;
}

const refs = new Map<string, SchemaRef>();

/**
 * Validates once and returns the one SchemaRef for `name`: the same object every time, so
 * per-schema SQL can be memoized on it. `field` names the option in the error.
 */
export function schemaRef(name: string, field = 'schema'): SchemaRef {
  let ref = refs.get(name);
  if (ref === undefined) {
    ref = Object.freeze({ name, quoted: quoteIdentifier(name, field) }) as SchemaRef;
    refs.set(name, ref);
  }
  return ref;
}

/** Builds a schema's SQL text once and hands out the same object afterwards. */
export function perSchema<T>(build: (schema: SchemaRef) => T): (schema: SchemaRef) => T {
  const built = new WeakMap<SchemaRef, T>();
  return (schema) => {
    let value = built.get(schema);
    if (value === undefined) {
      value = build(schema);
      built.set(schema, value);
    }
    return value;
  };
}
