import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { checkSamples, extractSamples } from '../../scripts/docs/samples.js';
import { renderCliReference } from '../../scripts/docs/cli.js';
import { EXAMPLE } from '../../scripts/docs/wire.js';
import { createProgram } from '../../src/cli/program.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRATCH = join(ROOT, '.scratch', 'docs-samples-unit');
after(() => rmSync(SCRATCH, { recursive: true, force: true }));

const fence = '```';

describe('docs samples check', () => {
  test('extracts ts and typescript blocks with the line of their fence, skips ignore and other languages', () => {
    const markdown = [
      '# Title', //                                   1
      `${fence}ts`, //                                 2
      'const a = 1;', //                               3
      fence, //                                        4
      `${fence}sh`, //                                 5
      'npm test', //                                   6
      fence, //                                        7
      `${fence}typescript`, //                         8
      'const b = 2;', //                               9
      fence, //                                        10
      `${fence}ts ignore`, //                          11
      'not compiled', //                               12
      fence, //                                        13
    ].join('\n');
    assert.deepEqual(extractSamples('x.md', markdown), [
      { source: 'x.md', line: 2, code: 'const a = 1;\n' },
      { source: 'x.md', line: 8, code: 'const b = 2;\n' },
    ]);
  });

  test('an unclosed block is an error naming the file and line', () => {
    assert.throws(() => extractSamples('x.md', `text\n${fence}ts\nconst a = 1;\n`), /x\.md:2: unclosed code block/);
  });

  test('a sample that does not type-check is reported at its Markdown line; a right one passes', () => {
    const markdown = [
      'A right sample:',
      `${fence}ts`,
      "import { applyIncrement } from 'converge-events';",
      "import { readStatus } from 'converge-events/ops';",
      'export const used = [applyIncrement, readStatus];',
      fence,
      'A wrong one: the payload is unknown without a cast, as in the old README.',
      `${fence}ts`,
      "import type { EventEnvelope } from 'converge-events';",
      'export const delta = (event: EventEnvelope): number => event.payload.delta;',
      fence,
    ].join('\n');
    const problems = checkSamples(extractSamples('guide.md', markdown), ROOT, SCRATCH);
    assert.equal(problems.length, 1, problems.join('\n'));
    assert.match(problems[0]!, /^guide\.md:10:\d+: TS18046: /);
  });
});

describe('CLI reference', () => {
  test('has a section for every command and every flag of the program', () => {
    const page = renderCliReference();
    const walk = (command: ReturnType<typeof createProgram>, prefix: string): void => {
      for (const sub of command.commands) {
        const path = `${prefix} ${sub.name()}`;
        assert.ok(page.includes(`## ${path}\n`), `section for ${path}`);
        for (const option of sub.options) assert.ok(page.includes(`\`${option.flags}\``), `${path} ${option.flags}`);
        walk(sub, path);
      }
    };
    walk(createProgram(), 'converge');
  });
});

describe('events reference', () => {
  test('docs/reference/events.md has a row for every envelope field', () => {
    const page = readFileSync(join(ROOT, 'docs', 'reference', 'events.md'), 'utf8');
    for (const field of Object.keys(EXAMPLE)) assert.ok(page.includes(`| \`${field}\` |`), `row for ${field}`);
  });
});

/** Tables a sample writes to (`INSERT INTO t`, `UPDATE t`), by name without a schema or quotes. */
function tablesWritten(code: string): Set<string> {
  return new Set(
    [...code.matchAll(/\b(?:INSERT\s+INTO|(?<!DO\s+)UPDATE)\s+([a-z_][a-z0-9_]*)\b/gi)].map((m) => m[1]!.toLowerCase()),
  );
}

test("every README sample creates the tables it writes to, so a reader's first run works", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const samples = extractSamples('README.md', readme);
  assert.ok(
    samples.some((sample) => tablesWritten(sample.code).size > 0),
    'the README writes to a table',
  );
  for (const sample of samples) {
    const created = new Set(
      [...sample.code.matchAll(/CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)/gi)].map((m) =>
        m[1]!.toLowerCase(),
      ),
    );
    const missing = [...tablesWritten(sample.code)].filter((table) => !created.has(table));
    assert.deepEqual(missing, [], `README.md:${sample.line} writes to tables it does not create`);
  }
});
