/** The event catalog (src/envelope/events.ts): defineEvents, payload validation and the paths its errors name. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import {
  catalogAccepts,
  defineEvents,
  isEventCatalog,
  issuePaths,
  validatePayload,
} from '../../src/envelope/events.js';
import type { StandardSchemaV1 } from '../../src/envelope/standard-schema.js';
import { ConfigError, EnvelopeValidationError, PayloadValidationError } from '../../src/runtime/errors.js';

const SECRET = 'SECRET-PII-42';

/** A hand-written Standard Schema with an async validate, as some libraries have: no zod involved. */
const asyncPositive: StandardSchemaV1<number> = {
  '~standard': {
    version: 1,
    vendor: 'test',
    validate: async (value) =>
      typeof value === 'number' && value > 0 ? { value } : { issues: [{ message: `${String(value)} is bad` }] },
  },
};

const catalog = defineEvents({
  OrderPlaced: z.object({ orderId: z.string(), lines: z.array(z.object({ qty: z.number().int() })) }),
  OrderPaid: z.object({ amount: z.number(), currency: z.string().default('EUR') }),
  Scored: z.object({ scores: z.record(z.string(), z.number()) }),
  Counted: asyncPositive,
});

describe('defineEvents', () => {
  it('keeps the schemas by type, frozen; a type-only catalog has none', () => {
    assert.deepEqual(Object.keys(catalog.schemas!), ['OrderPlaced', 'OrderPaid', 'Scored', 'Counted']);
    assert.ok(Object.isFrozen(catalog) && Object.isFrozen(catalog.schemas));
    assert.equal(defineEvents<{ A: { n: number } }>().schemas, undefined);
    assert.ok(isEventCatalog(catalog) && isEventCatalog(defineEvents()));
    assert.ok(!isEventCatalog({ OrderPlaced: z.object({}) }) && !isEventCatalog(null));
  });

  it('rejects a value that is not a Standard Schema, naming every such type', () => {
    assert.throws(
      () => defineEvents({ A: { parse: () => 1 }, B: z.string(), C: 'nope' } as never),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.map((p) => p.path).join() === 'A,C' &&
        err.code === 'CONVERGE_INVALID_CONFIG',
    );
  });
});

describe('validatePayload', () => {
  it("returns the schema's output (defaults filled in); sync and async schemas alike", async () => {
    assert.deepEqual(await validatePayload(catalog, 'OrderPaid', { amount: 3 }), { amount: 3, currency: 'EUR' });
    assert.equal(await validatePayload(catalog, 'Counted', 4), 4);
  });

  it('without schemas it passes the payload through, and accepts any type', async () => {
    const payload = { anything: true };
    assert.equal(await validatePayload(undefined, 'X', payload), payload);
    assert.equal(await validatePayload(defineEvents<{ X: unknown }>(), 'Y', payload), payload);
    assert.ok(catalogAccepts(undefined, 'Y') && catalogAccepts(defineEvents(), 'Y'));
  });

  it('a type the catalog does not list is an invalid eventType; so is a prototype key', async () => {
    assert.ok(!catalogAccepts(catalog, 'OrderShipped') && !catalogAccepts(catalog, 'toString'));
    for (const type of ['OrderShipped', 'toString', '__proto__'])
      await assert.rejects(
        validatePayload(catalog, type, {}),
        (err: unknown) => err instanceof EnvelopeValidationError && err.field === 'eventType',
      );
  });

  it('a mismatch throws PayloadValidationError with every failing path and never a value', async () => {
    const err = await validatePayload(catalog, 'OrderPlaced', {
      orderId: 42,
      lines: [{ qty: 1 }, { qty: SECRET }, { qty: 1.5 }],
    }).then(
      () => assert.fail('expected a rejection'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof PayloadValidationError && err instanceof EnvelopeValidationError);
    assert.equal(err.code, 'CONVERGE_INVALID_PAYLOAD');
    assert.equal(err.field, 'payload');
    assert.equal(err.eventType, 'OrderPlaced');
    assert.deepEqual(err.paths, ['orderId', 'lines.1.qty', 'lines.2.qty']);
    assert.equal(
      err.message,
      'invalid envelope field "payload": does not match the OrderPlaced schema at "orderId", "lines.1.qty", "lines.2.qty"',
    );
    assert.ok(!err.message.includes(SECRET));
  });

  it('the messages of the schema library (which may quote the value) are dropped; the root is named', async () => {
    await assert.rejects(validatePayload(catalog, 'Counted', SECRET), (err: unknown) => {
      assert.ok(err instanceof PayloadValidationError);
      assert.deepEqual(err.paths, ['(root)']);
      assert.ok(!err.message.includes(SECRET));
      return true;
    });
  });

  it('a path segment that is not a plain name or index (a record key may be personal data) shows as *', async () => {
    await assert.rejects(
      validatePayload(catalog, 'Scored', { scores: { 'jane.doe@example.com': 'x', plain_key: 'y' } }),
      (err: unknown) => err instanceof PayloadValidationError && err.paths.join() === 'scores.*,scores.plain_key',
    );
  });
});

describe('issuePaths', () => {
  it('joins segments (keys or { key } objects), dedupes, masks symbols and odd keys, and stops at ten', () => {
    assert.deepEqual(
      issuePaths([
        { message: 'm', path: ['a', 0, { key: 'b' }] },
        { message: 'm', path: ['a', 0, { key: 'b' }] },
        { message: 'm', path: [Symbol('s'), -1, 1.5, 'with space'] },
        { message: 'm' },
      ]),
      ['a.0.b', '*.*.*.*', '(root)'],
    );
    const many = Array.from({ length: 20 }, (_, i) => ({ message: 'm', path: [`f${i}`] }));
    assert.equal(issuePaths(many).length, 10);
    assert.deepEqual(issuePaths([]), ['(root)']);
  });
});
