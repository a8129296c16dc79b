import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, test } from 'node:test';
import { z } from 'zod';
import type { OptionsSpec } from '../../src/runtime/options.js';
import { COMPONENTS, OPTIONS_DOC } from '../../scripts/docs/options.js';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every `export const x = defineOptions(` in src, found by reading the text (the CLI runs on import). */
function declaredSpecs(): { file: string; name: string }[] {
  return sourceFiles(SRC).flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(/export const (\w+) = defineOptions\(/g)].map((match) => ({
      file,
      name: match[1]!,
    })),
  );
}

type Def = Record<string, unknown> & { type: string };
const defOf = (schema: z.ZodType): Def => (schema as unknown as { def: Def }).def;

/** The fields of an object schema, looking through the pipes refine/transform add. */
function shapeOf(schema: z.ZodType): Record<string, z.ZodType> {
  const def = defOf(schema);
  if (def.type === 'object') return (schema as unknown as z.ZodObject).shape;
  if (def.type === 'pipe') return shapeOf(def.in as z.ZodType);
  throw new Error(`not an object schema: ${def.type}`);
}

const descriptionOf = (field: z.ZodType): string | undefined =>
  z.globalRegistry.get(field)?.description ?? field.description;

describe('options reference', () => {
  test('finds the option specs declared in src', () => {
    // Guards the scan itself: a regex that matched nothing would make the next test vacuous.
    const names = declaredSpecs().map((spec) => spec.name);
    for (const name of ['relayOptions', 'consumerOptions', 'cleanupOptions', 'reconcileOptions', 'grantsOptions'])
      assert.ok(names.includes(name), `${name} not found by the scan`);
  });

  test('every defineOptions spec in src is in COMPONENTS and has a section in docs/reference/options.md', async () => {
    const listed = new Set(COMPONENTS.map(([spec]) => spec));
    const doc = readFileSync(OPTIONS_DOC, 'utf8');
    const missing: string[] = [];
    for (const { file, name } of declaredSpecs()) {
      const module = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
      const spec = module[name] as OptionsSpec<z.ZodType> | undefined;
      const where = `${name} (${relative(SRC, file)})`;
      assert.ok(
        spec && typeof spec.component === 'string' && typeof spec.parse === 'function',
        `${where} is not a spec`,
      );
      if (!listed.has(spec)) missing.push(`${where}: not in COMPONENTS of scripts/docs/options.ts`);
      else if (!doc.includes(`\n## ${spec.component}\n`)) missing.push(`${where}: no "## ${spec.component}" section`);
    }
    assert.deepEqual(missing, []);
  });

  test('component names are unique, so each section heading names one call', () => {
    const names = COMPONENTS.map(([spec]) => spec.component);
    assert.deepEqual(
      names.filter((name, i) => names.indexOf(name) !== i),
      [],
    );
  });

  test('every field of every listed schema has a description', () => {
    const undocumented = COMPONENTS.flatMap(([spec]) =>
      Object.entries(shapeOf(spec.schema))
        .filter(([, field]) => !descriptionOf(field)?.trim())
        .map(([key]) => `${spec.component}.${key}`),
    );
    assert.deepEqual(undocumented, []);
  });
});
