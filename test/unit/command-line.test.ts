/** The repository's scripts answer --help and a bad flag with their usage, not a stack trace (kit/command-line.ts). */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const DEMO = ['--import', 'tsx', 'scripts/demo/main.ts'];

async function demo(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return node([...DEMO, ...args]);
}

/** Runs node with `args` in the repository, the database configured where nothing answers. */
async function node(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failed = err as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

// Each case is a node process of its own, mostly waiting on tsx: they run side by side.
describe('the demo command line', { concurrency: true }, () => {
  test('npm run demo -- --help prints the usage and exits 0, before touching any service', async () => {
    const run = await demo('--help');
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^usage: npm run demo -- \[--duration <seconds>\] \[--settle <seconds>\]/);
    assert.equal(run.stderr, '');
  });

  test('an unknown or incomplete flag names the problem and the usage, exit 2, no stack trace', async () => {
    for (const args of [['--bogus'], ['--duration']]) {
      const run = await demo(...args);
      assert.equal(run.code, 2, args.join(' '));
      assert.match(run.stderr, /^(Unknown option '--bogus'|Option '--duration <value>' argument missing)/);
      assert.match(run.stderr, /usage: npm run demo/);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack frames');
    }
  });

  test('the launcher of npm run demo passes --help on without looking for services', async () => {
    const run = await node([
      '--import',
      'tsx',
      'scripts/local-env.ts',
      '--in-process',
      '--',
      process.execPath,
      ...DEMO,
      '--help',
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^usage: npm run demo/);
    assert.doesNotMatch(run.stderr, /PostgreSQL/, 'no service was probed or chosen');
  });
});
