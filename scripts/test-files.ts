/**
 * `tsx scripts/test-files.ts [--concurrency N] [--timeout MS] [--label L] [--together] [--skip-marked M]
 * FILE...`: runs node:test files N at a time, each in a process of its own (`node --import tsx --test FILE`), and
 * fails if any failed. With --together the files share N processes instead (the unit suite: its files
 * need no process of their own, and loading src/ under tsx once per file was most of its time). The integration suite mostly waits on PostgreSQL and RabbitMQ, so files run side by
 * side; each uses schemas, queues and connection names of its own (test/support/rig.ts uniqueName),
 * so none disturbs another.
 *
 * - Longest first, by the durations of the previous runs kept in node_modules/.cache (per --label:
 *   the PostgreSQL 18 pass times differently); files never timed start first.
 * - A file marked `// test-files: heavy` (it starts a PostgreSQL server, a browser or a fleet of
 *   processes of its own) never runs beside another heavy one: on two cores two of them at once
 *   starve the rest into timeouts. Likewise files marked `// test-files: group <name>` never run
 *   beside another of the same group (`cdc-server`: the logical-replication server's WAL and slots).
 * - Each file's output is printed whole when it ended, so no two interleave; then the slowest files
 *   and the wall time.
 * - --skip-marked M leaves out the files marked `// test-files: M <reason>` and says how many (the
 *   pooler pass: `session`, files that need a session of their own, which PgBouncer in transaction
 *   mode cannot give).
 * - SIGINT/SIGTERM are passed to the running files, which clean up, and the run ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path, { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { failureDigest } from './env/test-output.js';
import { groupsOf, longestFirst, markerReason, nextToStart, shareOut, type TestFile } from './env/test-schedule.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    concurrency: { type: 'string', default: '4' },
    timeout: { type: 'string', default: '120000' },
    label: { type: 'string', default: 'default' },
    together: { type: 'boolean', default: false },
    'skip-marked': { type: 'string' },
  },
});
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1 || positionals.length === 0) {
  process.stderr.write(
    'usage: tsx scripts/test-files.ts [--concurrency N] [--timeout MS] [--label L] [--together] ' +
      '[--skip-marked M] FILE...\n',
  );
  process.exit(2);
}

const skipMarked = values['skip-marked'];
const leftOut = skipMarked
  ? positionals.filter((file) => markerReason(readFileSync(file, 'utf8'), skipMarked) !== undefined)
  : [];
const chosen = positionals.filter((file) => !leftOut.includes(file));
if (skipMarked)
  process.stdout.write(
    `# test-files: left out ${leftOut.length} of ${positionals.length} files, marked ${skipMarked}` +
      `${leftOut.length ? `: ${leftOut.map((file) => file.replace(/^.*\//, '')).join(', ')}` : ''}\n`,
  );

const timesFile = `node_modules/.cache/converge-test-files/${values.label.replace(/[^\w-]/g, '_')}.json`;
const previous = readTimes();
const files: TestFile[] = values.together
  ? shareOut(chosen, concurrency, previous).map((paths, i) => ({ path: shareEntry(paths, i), groups: [] }))
  : chosen.map((file) => ({ path: file, groups: groupsOf(readFileSync(file, 'utf8')) }));
const waiting = longestFirst(files, previous);

interface Ended {
  path: string;
  code: number;
  seconds: number;
  output: string;
}

const running = new Set<ChildProcess>();
const ended: Ended[] = [];
/** The groups of the files running now (test-schedule.ts: a group runs one file at a time). */
const runningGroups = new Set<string>();
const sleepers: (() => void)[] = [];
let stopping = false;
const started = Date.now();

/** A module importing each of `paths`: node --test runs it as one file, so they share its process. */
function shareEntry(paths: string[], index: number): string {
  const entry = path.join(dirname(timesFile), `${values.label}-share-${index + 1}-of-${concurrency}.test.mjs`);
  mkdirSync(dirname(entry), { recursive: true });
  writeFileSync(
    entry,
    paths.map((file) => `import ${JSON.stringify(pathToFileURL(path.resolve(file)).href)};\n`).join(''),
  );
  return entry;
}

function readTimes(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(timesFile, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

function runFile(file: TestFile): Promise<Ended> {
  const fileStarted = Date.now();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-reporter=spec', `--test-timeout=${values.timeout}`, file.path],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => {
    const finish = (code: number, note = '') => {
      running.delete(child);
      const seconds = (Date.now() - fileStarted) / 1000;
      const verdict = code === 0 ? 'ok' : `FAILED (exit ${code})`;
      process.stdout.write(`\n# ${file.path}: ${verdict} in ${seconds.toFixed(1)} s${note}\n`);
      const output = Buffer.concat(chunks);
      process.stdout.write(output);
      resolve({ path: file.path, code, seconds, output: output.toString('utf8') });
    };
    child.once('error', (err) => finish(1, `, could not start: ${err.message}`));
    child.once('close', (code, signal) => finish(code ?? 1, signal ? `, ended by ${signal}` : ''));
  });
}

async function worker(): Promise<void> {
  for (;;) {
    if (stopping) return;
    const index = nextToStart(waiting, runningGroups);
    if (index === -1) {
      if (waiting.length === 0) return;
      // Only files of running groups are left: wait until some file ends.
      await new Promise<void>((resolve) => sleepers.push(resolve));
      continue;
    }
    const [file] = waiting.splice(index, 1);
    for (const group of file!.groups) runningGroups.add(group);
    ended.push(await runFile(file!));
    for (const group of file!.groups) runningGroups.delete(group);
    for (const wake of sleepers.splice(0)) wake();
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    stopping = true;
    for (const child of running) child.kill(signal);
    for (const wake of sleepers.splice(0)) wake();
  });
}

await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, worker));

const times = { ...previous };
// A share's time is not its files' own: only files run alone are timed.
if (!values.together) for (const run of ended) if (run.code === 0) times[run.path] = Math.round(run.seconds * 10) / 10;
mkdirSync(dirname(timesFile), { recursive: true });
writeFileSync(timesFile, `${JSON.stringify(times, null, 1)}\n`);

const failed = ended.filter((run) => run.code !== 0);
const slowest = [...ended].sort((a, b) => b.seconds - a.seconds).slice(0, 8);
const wall = (Date.now() - started) / 1000;
const skipped = skipMarked ? ` (${leftOut.length} marked ${skipMarked} left out)` : '';
process.stdout.write(
  `\n# test-files: ${ended.length} of ${files.length} files${skipped}, ` +
    `${concurrency} at a time, in ${wall.toFixed(0)} s; ` +
    `slowest: ${slowest.map((run) => `${run.path.replace(/^.*\//, '')} ${run.seconds.toFixed(0)} s`).join(', ')}\n`,
);
for (const run of failed)
  process.stdout.write(`\n# ${run.path} failed; its failures again:\n${failureDigest(run.output).join('\n')}\n`);
for (const run of failed) process.stderr.write(`test-files: FAILED ${run.path}\n`);
if (ended.length < files.length)
  process.stderr.write(`test-files: stopped, ${files.length - ended.length} files not run\n`);
process.exit(failed.length === 0 && ended.length === files.length ? 0 : 1);
