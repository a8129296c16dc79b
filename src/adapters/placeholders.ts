/**
 * converge writes its SQL with PostgreSQL's `$1..$n` parameters. Some ORM raw-query APIs take
 * other placeholders (knex and MikroORM: `?`), so the adapters translate. A regex over the text
 * would also rewrite a `$1` or `?` inside a string literal, a quoted identifier or a comment,
 * changing data; this module tokenizes like PostgreSQL's lexer does for those constructs and
 * touches only parameters in plain SQL. Pure: no I/O, no imports beyond the error type.
 */
import { AdapterError } from '../runtime/errors.js';

/** SQL split at its parameters: `parts.length === parameters.length + 1`; `parameters` are the 1-based `$n` numbers in order. */
export interface SplitSql {
  readonly parts: readonly string[];
  readonly parameters: readonly number[];
}

/** Characters that continue an identifier or keyword (PostgreSQL also allows `$` after the first one). */
const IDENTIFIER_CHAR = /[A-Za-z0-9_$\u0080-\uffff]/;
const TAG = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

/** Index just past the literal, identifier or comment starting at `i`, or -1 when none starts there. */
function skipOpaque(text: string, i: number): number {
  const c = text[i];
  const next = text[i + 1];
  if (c === "'") return skipQuoted(text, i + 1, "'", isEscapeString(text, i));
  if (c === '"') return skipQuoted(text, i + 1, '"', false);
  if (c === '-' && next === '-') {
    const end = text.indexOf('\n', i + 2);
    return end === -1 ? text.length : end + 1;
  }
  if (c === '/' && next === '*') return skipBlockComment(text, i + 2);
  if (c === '$' && !isIdentifierTail(text, i)) {
    const tag = TAG.exec(text.slice(i))?.[0];
    if (tag === undefined) return -1;
    const end = text.indexOf(tag, i + tag.length);
    return end === -1 ? text.length : end + tag.length;
  }
  return -1;
}

/** `E'...'` (or `e'...'`) takes backslash escapes; an `E` that ends a longer word is not that prefix. */
function isEscapeString(text: string, quote: number): boolean {
  const prefix = text[quote - 1];
  if (prefix !== 'E' && prefix !== 'e') return false;
  return !isIdentifierTail(text, quote - 1);
}

function isIdentifierTail(text: string, i: number): boolean {
  return i > 0 && IDENTIFIER_CHAR.test(text[i - 1]!);
}

/** Past the closing quote; a doubled quote is an escaped one, and in an E-string a backslash escapes the next character. */
function skipQuoted(text: string, from: number, quote: string, backslashEscapes: boolean): number {
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (backslashEscapes && c === '\\') i++;
    else if (c === quote) {
      if (text[i + 1] === quote) i++;
      else return i + 1;
    }
  }
  return text.length; // unterminated: PostgreSQL rejects the statement, nothing here is a parameter
}

/** PostgreSQL's block comments nest. */
function skipBlockComment(text: string, from: number): number {
  let depth = 1;
  for (let i = from; i < text.length; i++) {
    if (text[i] === '/' && text[i + 1] === '*') {
      depth++;
      i++;
    } else if (text[i] === '*' && text[i + 1] === '/') {
      depth--;
      i++;
      if (depth === 0) return i + 1;
    }
  }
  return text.length;
}

/** Splits `text` at its `$n` parameters, leaving literals, quoted identifiers and comments whole. */
export function splitParameters(text: string): SplitSql {
  const parts: string[] = [];
  const parameters: number[] = [];
  let current = '';
  let i = 0;
  while (i < text.length) {
    const end = skipOpaque(text, i);
    if (end !== -1) {
      current += text.slice(i, end);
      i = end;
      continue;
    }
    const digits = text[i] === '$' && !isIdentifierTail(text, i) ? /^\$(\d+)/.exec(text.slice(i)) : null;
    if (digits) {
      parts.push(current);
      parameters.push(Number(digits[1]));
      current = '';
      i += digits[0].length;
      continue;
    }
    current += text[i];
    i++;
  }
  parts.push(current);
  return { parts, parameters };
}

/** The values in the order the split's parameters use them (a parameter used twice appears twice). */
export function valuesInOrder(split: SplitSql, values: readonly unknown[], adapter: string): unknown[] {
  return split.parameters.map((n) => {
    if (n < 1 || n > values.length)
      throw new AdapterError(adapter, `the statement uses $${n} but ${values.length} value(s) were given`);
    return values[n - 1];
  });
}

/**
 * `$n` SQL as knex's `raw(sql, bindings)` takes it: every parameter becomes `?` with its value at
 * that position, and every `?` already in the text (a jsonb operator, a literal) becomes `\?`,
 * which knex turns back into a plain `?` instead of binding a value. knex cannot express a
 * backslash right before a `?` (it drops the backslashes), so that throws instead of changing the SQL.
 */
export function toQuestionMarks(
  text: string,
  values: readonly unknown[],
  adapter: string,
): { sql: string; bindings: unknown[] } {
  const split = splitParameters(text);
  const bindings = valuesInOrder(split, values, adapter);
  let sql = '';
  const append = (piece: string) => {
    if (piece.startsWith('?') || piece.startsWith('\\?')) {
      if (sql.endsWith('\\'))
        throw new AdapterError(adapter, 'a backslash right before a "?" or a parameter cannot be passed through knex');
    }
    sql += piece;
  };
  split.parts.forEach((part, index) => {
    const pieces = part.split('?');
    pieces.forEach((piece, at) => {
      if (at > 0) append('\\?');
      append(piece);
    });
    if (index < split.parameters.length) append('?');
  });
  return { sql, bindings };
}
