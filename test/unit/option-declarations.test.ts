import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { z } from 'zod';
import { COMPONENTS } from '../../scripts/docs/options.js';
import { optionDeclarations } from '../support/option-declarations.js';

/**
 * Names that mean different things in different components, each declared on purpose as often as
 * listed. Anything else shared by name must be one declaration (a field object from one place; a
 * component may still word its description for its own use, make it optional or give its own default).
 */
const DELIBERATELY_DIFFERENT: Record<string, [declarations: number, why: string]> = {
  apply: [2, 'rebuild writes one aggregate from its source row; gap repair writes from a snapshot on its transaction'],
  backoff: [3, "the relays' retry schedule, the consumer's delay between attempts, an effect's between calls"],
  batchSize: [3, 'rows a relay claims, deliveries per consumer transaction, rows per retention statement'],
  consumer: [2, "the inbox scope, and startTenants' consumer options per tenant schema"],
  eventType: [2, 'a quarantine filter, and the type a producer is about to write in a compat check'],
  hooks: [4, "each engine's own fault-injection points"],
  listen: [2, "a relay's own LISTEN connection, and the one LISTEN connection startTenants' relays share"],
  limit: [4, 'each list has its own page size and order'],
  maxAttempts: [
    2,
    'unroutable returns before a relay fails an event; handler attempts before the consumer quarantines',
  ],
  olderThanMs: [4, 'the age of quarantine rows, of gaps, of inbox rows to compact: each its own filter'],
  queue: [2, "a consumer's queue (its retry tiers are named after it) and any queue a replay is sent to"],
  reason: [2, 'a quarantine filter, and the required note of a discard'],
  schemas: [2, "a consumer's schema evolution per eventType, and the tenant schemas startTenants serves"],
  schema: [2, 'appendToOutbox and migrate take a plain string that throws InvalidIdentifierError where it is used'],
  timeoutMs: [2, 'one remote call of an effect, and the wait for a projection version'],
};

const declarations = () =>
  optionDeclarations(COMPONENTS.map(([spec]) => spec as { component: string; schema: z.ZodType }));

test('an option name used by several components is declared once, or as often as listed as deliberately different', () => {
  const unexpected = declarations().filter(
    ({ name, declarations }) => declarations.length !== (DELIBERATELY_DIFFERENT[name]?.[0] ?? 1),
  );
  assert.deepEqual(
    unexpected.map(({ name, declarations }) => `${name}: ${declarations.map((d) => d.join('+')).join(' | ')}`),
    [],
  );
});

test('every deliberately different name is an option of some component', () => {
  const names = new Set(declarations().map(({ name }) => name));
  for (const name of Object.keys(DELIBERATELY_DIFFERENT)) assert.ok(names.has(name), name);
});

test('the check tells a shared field from two declarations of the same shape', async () => {
  const { z: zod } = await import('zod');
  const shared = zod.number().int().min(1);
  const spec = (component: string, shape: Record<string, z.ZodType>) => ({
    component,
    schema: zod.strictObject(shape),
  });
  const found = optionDeclarations([
    spec('a', { size: shared, depth: zod.number().int().min(1) }),
    spec('b', { size: shared.default(3).describe('worded for b'), depth: zod.number().int().min(1) }),
  ]);
  assert.deepEqual(
    found.map(({ name, declarations }) => [name, declarations]),
    [
      ['depth', [['a'], ['b']]],
      ['size', [['a', 'b']]],
    ],
  );
});
