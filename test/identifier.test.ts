import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isValidIdentifier, quoteIdentifier } from '../src/db/identifier.js';
import { ConvergeError, InvalidIdentifierError } from '../src/errors.js';

describe('quoteIdentifier', () => {
  for (const name of ['converge', 'outbox_2', '_private', 'a', 'x'.repeat(63)]) {
    it(`accepts ${name.length > 10 ? `a ${name.length}-character name` : name} and double-quotes it`, () => {
      assert.equal(quoteIdentifier(name), `"${name}"`);
      assert.equal(isValidIdentifier(name), true);
    });
  }

  const rejected: Array<[string, string]> = [
    ['a double quote', 'bad"name'],
    ['a quote-breaking injection', 'x"; DROP SCHEMA public CASCADE; --'],
    ['a single quote', "bad'name"],
    ['upper case', 'Converge'],
    ['a space', 'my schema'],
    ['a semicolon', 'a;b'],
    ['a dot', 'public.outbox'],
    ['a hyphen', 'my-schema'],
    ['a leading digit', '1schema'],
    ['non-ASCII letters', 'schéma'],
    ['the empty string', ''],
    ['64 characters', 'x'.repeat(64)],
    ['a trailing newline', 'converge\n'],
  ];
  for (const [label, name] of rejected) {
    it(`rejects ${label}`, () => {
      assert.equal(isValidIdentifier(name), false);
      assert.throws(
        () => quoteIdentifier(name),
        (err: unknown) => {
          assert.ok(err instanceof InvalidIdentifierError);
          assert.ok(err instanceof ConvergeError);
          assert.equal(err.code, 'CONVERGE_INVALID_IDENTIFIER');
          assert.equal(err.identifier, name);
          return true;
        },
      );
    });
  }
});
