/** The `$n` tokenizer behind the knex, MikroORM and Drizzle adapters: parameters in plain SQL only. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { splitParameters, toQuestionMarks } from '../../src/adapters/placeholders.js';
import { AdapterError } from '../../src/runtime/errors.js';

const knex = (text: string, values: unknown[] = []) => toQuestionMarks(text, values, 'knex');

describe('splitParameters', () => {
  it('splits at each $n, in order, repeats included', () => {
    assert.deepEqual(splitParameters('SELECT $2, $1, $10 + $2'), {
      parts: ['SELECT ', ', ', ', ', ' + ', ''],
      parameters: [2, 1, 10, 2],
    });
  });

  it('leaves $n inside literals, identifiers and comments alone', () => {
    const cases = [
      "SELECT '$1'",
      "SELECT 'it''s $1'",
      "SELECT E'\\' $1'",
      "SELECT e'\\\\' || 'x$1'",
      'SELECT "col$1"',
      'SELECT "a""$1"',
      'SELECT $$ $1 $$',
      'SELECT $tag$ $1 $$ $1 $tag$',
      'SELECT 1 -- $1\n',
      'SELECT /* $1 /* nested $2 */ still $3 */ 1',
      'SELECT a$1 FROM t',
    ];
    for (const text of cases) assert.deepEqual(splitParameters(text).parameters, [], text);
  });

  it('finds parameters right after literals, comments and casts', () => {
    assert.deepEqual(splitParameters("SELECT 'x'||$1, $2::int -- c\n, $3").parameters, [1, 2, 3]);
    assert.deepEqual(splitParameters('SELECT "x"=$1 /* c */ + $2').parameters, [1, 2]);
    assert.deepEqual(splitParameters("SELECT E'\\''=$1").parameters, [1]);
  });

  it('an E that ends a word does not start an escape string', () => {
    // In standard strings a backslash is literal, so 'a\' ends at its second quote.
    assert.deepEqual(splitParameters("SELECT 1 WHERE 'a\\'=$1").parameters, [1]);
  });

  it('an unterminated literal or comment swallows the rest', () => {
    assert.deepEqual(splitParameters("SELECT '$1").parameters, []);
    assert.deepEqual(splitParameters('SELECT /* $1').parameters, []);
    assert.deepEqual(splitParameters('SELECT $q$ $1').parameters, []);
  });

  it('joining the parts back with the parameters gives the text', () => {
    const text = "UPDATE t SET a = $1, b = 'x$2?' WHERE id = $2 AND c ? 'k'";
    const { parts, parameters } = splitParameters(text);
    assert.equal(parts.map((p, i) => p + (i < parameters.length ? `$${parameters[i]}` : '')).join(''), text);
  });
});

describe('toQuestionMarks (knex raw)', () => {
  it('turns $n into ? with the values at their positions', () => {
    assert.deepEqual(knex('SELECT $2, $1, $2', ['a', 'b']), { sql: 'SELECT ?, ?, ?', bindings: ['b', 'a', 'b'] });
  });

  it('keeps $1 inside a string literal as data', () => {
    assert.deepEqual(knex("INSERT INTO t VALUES ($1, '$1 costs $2')", [7]), {
      sql: "INSERT INTO t VALUES (?, '$1 costs $2')",
      bindings: [7],
    });
  });

  it('escapes every ? already in the text, in and out of literals', () => {
    assert.deepEqual(knex("SELECT data ? 'k', 'why?' FROM t WHERE id = $1", [1]), {
      sql: "SELECT data \\? 'k', 'why\\?' FROM t WHERE id = ?",
      bindings: [1],
    });
    assert.equal(knex('SELECT a ?| b, a ?? b').sql, 'SELECT a \\?| b, a \\?\\? b');
  });

  it('a $n without a value throws, naming the parameter, never a value', () => {
    assert.throws(
      () => knex('SELECT $1, $3', ['secret', 'x']),
      (err: unknown) =>
        err instanceof AdapterError &&
        err.code === 'CONVERGE_ADAPTER_MISUSE' &&
        /\$3/.test(err.message) &&
        !err.message.includes('secret'),
    );
    assert.throws(() => knex('SELECT $0', []), AdapterError);
  });

  it('a backslash right before ? throws: knex would drop it', () => {
    assert.throws(() => knex("SELECT E'\\\\?'"), AdapterError);
    assert.throws(() => knex('SELECT $1 -- ends in \\?\n', [1]), AdapterError);
    assert.doesNotThrow(() => knex("SELECT '\\x', $1", [1]));
  });
});
