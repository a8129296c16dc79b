/**
 * Type-checks every ```ts / ```typescript block of README.md, CONTRIBUTING.md and docs/**\/*.md the
 * way a user's project would compile it: strict, NodeNext, `converge-events` and its subpaths
 * resolved to src/ (so a sample is checked against the code, not against a stale build). Each block
 * is written to .scratch/docs-samples/ as a module of its own and must be complete: imports and
 * declarations included. A block opened with ```ts ignore is a deliberate fragment and is skipped;
 * keep those rare. Failures are reported as `<file>:<line>` of the Markdown source. Exit 1 on any.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRATCH = join(ROOT, '.scratch', 'docs-samples');

export interface Sample {
  /** Markdown file, relative to the repository root. */
  source: string;
  /** Line of the opening fence in that file (1-based); the code starts on the next line. */
  line: number;
  code: string;
}

const OPEN = /^```(ts|typescript)(?:\s+(.*))?$/;

/** The TypeScript blocks of one Markdown text, without those marked `ignore`. */
export function extractSamples(source: string, markdown: string): Sample[] {
  const samples: Sample[] = [];
  const lines = markdown.split('\n');
  let open: { line: number; ignore: boolean; code: string[] } | undefined;
  let otherFence = false;
  lines.forEach((text, index) => {
    if (open) {
      if (/^```\s*$/.test(text)) {
        if (!open.ignore) samples.push({ source, line: open.line, code: open.code.join('\n') + '\n' });
        open = undefined;
      } else open.code.push(text);
      return;
    }
    if (otherFence) {
      if (/^```\s*$/.test(text)) otherFence = false;
      return;
    }
    const match = OPEN.exec(text);
    if (match) open = { line: index + 1, ignore: (match[2] ?? '').split(/\s+/).includes('ignore'), code: [] };
    else if (text.startsWith('```')) otherFence = true;
  });
  if (open) throw new Error(`${source}:${open.line}: unclosed code block`);
  return samples;
}

/** README.md, CONTRIBUTING.md and every Markdown file under docs/, relative to the root. */
export function markdownFiles(root = ROOT): string[] {
  const found = ['README.md', 'CONTRIBUTING.md'].filter((file) => {
    try {
      readFileSync(join(root, file));
      return true;
    } catch {
      return false;
    }
  });
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found.sort();
}

/** What a user's strict NodeNext project sees, with the package's entry points mapped to src/. */
export function sampleCompilerOptions(root = ROOT): ts.CompilerOptions {
  const entry = (path: string) => [join(root, 'src', path)];
  return {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    noEmit: true,
    skipLibCheck: true,
    paths: {
      'converge-events': entry('index.ts'),
      'converge-events/ops': entry('ops/index.ts'),
      'converge-events/metrics': entry('metrics/index.ts'),
      'converge-events/dashboard': entry('dashboard/index.ts'),
      'converge-events/errors': entry('errors.ts'),
      'converge-events/internal': entry('internal/index.ts'),
      ...Object.fromEntries(
        ['kysely', 'knex', 'drizzle', 'typeorm', 'mikro-orm'].map((orm) => [
          `converge-events/${orm}`,
          entry(`adapters/${orm}.ts`),
        ]),
      ),
    },
  };
}

/** Writes each sample as a module to `dir`; returns the file name of each, in order. */
function writeSamples(samples: Sample[], dir: string): string[] {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return samples.map((sample, index) => {
    const name = `${sample.source.replace(/[^A-Za-z0-9]+/g, '_')}_L${sample.line}_${index}.ts`;
    const file = join(dir, name);
    // `export {}` makes even an import-less block a module, so top-level await works and names stay local.
    writeFileSync(file, `${sample.code}export {};\n`);
    return file;
  });
}

/** Type-checks the samples; returns one line per problem, located in the Markdown source. */
export function checkSamples(samples: Sample[], root = ROOT, dir = SCRATCH): string[] {
  const files = writeSamples(samples, dir);
  const bySample = new Map(files.map((file, index) => [ts.sys.resolvePath(file), samples[index]!]));
  const program = ts.createProgram(files, sampleCompilerOptions(root));
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n  ');
    const file = diagnostic.file;
    if (!file || diagnostic.start === undefined) return `TS${diagnostic.code}: ${message}`;
    const { line, character } = file.getLineAndCharacterOfPosition(diagnostic.start);
    const sample = bySample.get(ts.sys.resolvePath(file.fileName));
    const where = sample
      ? `${sample.source}:${sample.line + 1 + line}:${character + 1}`
      : `${relative(root, file.fileName)}:${line + 1}:${character + 1}`;
    return `${where}: TS${diagnostic.code}: ${message}`;
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const samples = markdownFiles().flatMap((file) => extractSamples(file, readFileSync(join(ROOT, file), 'utf8')));
  const problems = checkSamples(samples);
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`docs:check: ${problems.length} problem(s) in the TypeScript blocks of the docs`);
    process.exitCode = 1;
  } else console.log(`docs:check: ${samples.length} TypeScript blocks compile`);
}
