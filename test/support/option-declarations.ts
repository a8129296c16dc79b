import type { z } from 'zod';

interface Definition {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  schema?: z.ZodType;
  options?: z.ZodType[];
}

const defOf = (schema: z.ZodType): Definition => (schema as unknown as { _zod: { def: Definition } })._zod.def;

/** The object shape under a spec's refinements, transforms and defaults. */
function shapeOf(schema: z.ZodType): Record<string, z.ZodType> {
  let current: z.ZodType | undefined = schema;
  for (let depth = 0; current && depth < 20; depth++) {
    const def = defOf(current);
    if (def.type === 'object') return def.shape!;
    current = def.innerType ?? def.in ?? def.schema ?? def.options?.[0];
  }
  throw new Error('no object shape found in an options spec');
}

/**
 * What makes one declaration: zod's describe() and meta() copy a schema but keep its definition
 * object, and `.optional()` or `.default()` only wrap it, so the definition under those wrappers is
 * the declaration (its type and checks); a component may make it optional or default it its own way.
 * Two fields with equal text but built twice are two declarations.
 */
function declarationOf(field: z.ZodType): unknown {
  let def = defOf(field);
  while ((def.type === 'optional' || def.type === 'default') && def.innerType) def = defOf(def.innerType);
  return def;
}

/** Per option name (sorted), the components grouped by the declaration they use. */
export function optionDeclarations(
  specs: readonly { component: string; schema: z.ZodType }[],
): { name: string; declarations: string[][] }[] {
  const byName = new Map<string, Map<unknown, string[]>>();
  for (const spec of specs)
    for (const [name, field] of Object.entries(shapeOf(spec.schema))) {
      const declarations = byName.get(name) ?? new Map<unknown, string[]>();
      byName.set(name, declarations);
      const key = declarationOf(field);
      declarations.set(key, [...(declarations.get(key) ?? []), spec.component]);
    }
  return [...byName]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, declarations]) => ({ name, declarations: [...declarations.values()] }));
}
