/**
 * Flags of the repository's own scripts (the demo): `--help` prints the usage and exits 0; an
 * unknown or malformed flag prints its problem and the usage and exits 2, never a stack trace.
 */
import { parseArgs } from 'node:util';

type Options = Record<string, { type: 'string' | 'boolean'; default?: string | boolean; short?: string }>;

export function parseCommandLine<O extends Options>(usage: string, options: O, args = process.argv.slice(2)) {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  try {
    return parseArgs({ options, args }).values;
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${usage}\n`);
    process.exit(2);
  }
}
