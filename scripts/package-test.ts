/**
 * `npm run test:package`: the package as a user gets it. Packs the tarball (prepack builds
 * dist/), checks what it ships, installs it into a scratch project in the OS temp directory
 * (outside this repository, so none of our devDependencies can stand in for a missing
 * dependency), then:
 *   - lints the tarball with publint and @arethetypeswrong/cli;
 *   - type-checks an ESM and a CommonJS consumer under strict + NodeNext, with skipLibCheck off
 *     and on, including lines that must not compile (`tx` and `pool` are typed, not any);
 *   - runs, on each Node given (`-- --node <path>`, repeatable; default this one): the CommonJS
 *     `require()` of every entry point, the installed `converge` bin, and the guide's three steps
 *     against the local PostgreSQL and RabbitMQ in a unique schema, exchange and queue;
 *   - drops those and proves nothing is left.
 * Stops at the first failing step and names it. CONVERGE_KEEP_FAILED=1 keeps the scratch project.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  AMQP_URL,
  DATABASE_URL,
  connectPostgres,
  connectRabbit,
  dropBrokerNames,
  dropSchemas,
  existingBrokerObjects,
  existingSchemas,
  uniqueName,
} from '../kit/services.js';
import {
  CONSUMER_PACKAGE_JSON,
  REQUIRE_CTS,
  SAMPLE_TS,
  TSCONFIG,
  TSCONFIG_SKIP_LIB_CHECK,
  TYPES_TS,
} from './package-test.fixtures.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'node_modules', '.bin');
/** What the tarball may hold, and what it must. Tests, bench, sources and configs stay home. */
const SHIPPED = /^(dist\/.+\.(js|d\.ts|js\.map)|bin\/converge\.js|package\.json|README\.md|LICENSE|CHANGELOG\.md)$/;
const REQUIRED = [
  'package.json',
  'README.md',
  'LICENSE',
  'CHANGELOG.md',
  'bin/converge.js',
  'dist/index.js',
  // The dashboard's page, script and stylesheet, bundled by scripts/dashboard/build.ts.
  'dist/dashboard/assets/bundle.js',
];

/**
 * Node 22.12.0 (and 23.0-23.4) flag require() of ESM as experimental once per process; 20.19+ and
 * 22.13+ do not. Only that notice is tolerated: any other warning fails the step.
 */
const REQUIRE_ESM_WARNING =
  /^\(node:\d+\) ExperimentalWarning: CommonJS module \S+ is loading ES Module \S+ using require\(\)\.\nSupport for loading ES Module in require\(\) is an experimental feature and might change at any time\n\(Use `node --trace-warnings \.\.\.` to show where the warning was created\)\n$/;

class StepFailed extends Error {}

interface Output {
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; a non-zero exit, a signal or the hang guard fails the step with its output. */
function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }) {
  const env = { ...process.env, ...options.env };
  delete env.NODE_OPTIONS; // the consumer runs plain node, not this script's tsx loader
  return new Promise<Output>((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, env, timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout, stderr });
        const how = err.killed ? `was killed after ${options.timeoutMs ?? 120_000} ms` : `exited with ${err.code}`;
        reject(new StepFailed(`${[command, ...args].join(' ')} ${how}\n${tail(stdout)}\n${tail(stderr)}`.trim()));
      },
    );
  });
}

function tail(text: string, lines = 40): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/** npm as invoked by `npm run` (npm_execpath), or the one on PATH. */
function npm(args: string[], cwd: string): Promise<Output> {
  const cli = process.env.npm_execpath;
  return cli?.endsWith('.js') ? run(process.execPath, [cli, ...args], { cwd }) : run('npm', args, { cwd });
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new StepFailed(message);
}

let passed = 0;
async function step<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    const result = await work();
    passed++;
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
    return result;
  } catch (err) {
    console.log(`FAIL ${name}: ${err instanceof Error ? err.message : String(err)}`);
    throw new StepFailed(name);
  }
}

async function pack(scratch: string): Promise<string> {
  const { stdout } = await npm(['pack', '--json', '--pack-destination', scratch], ROOT);
  // prepack's build logs to stdout first; the JSON report is the rest, from its opening bracket line.
  const json = stdout.slice(stdout.search(/^\[$/m));
  const [report] = JSON.parse(json) as { filename: string; files: { path: string }[] }[];
  check(report !== undefined, 'npm pack reported no tarball');
  const files = report!.files.map((f) => f.path);
  const stray = files.filter((path) => !SHIPPED.test(path));
  check(stray.length === 0, `the tarball ships files it should not: ${stray.join(', ')}`);
  const missing = REQUIRED.filter((path) => !files.includes(path));
  check(missing.length === 0, `the tarball lacks ${missing.join(', ')}`);
  return join(scratch, report!.filename);
}

/** Installs from the npm cache (filled by `npm ci`); the registry only if something is not cached. */
async function install(project: string, tarball: string): Promise<void> {
  await writeFile(join(project, 'package.json'), JSON.stringify(CONSUMER_PACKAGE_JSON, null, 2));
  const args = ['install', '--no-audit', '--no-fund', '--no-package-lock', tarball];
  const output = await npm(['--offline', ...args], project).catch(() => npm(['--prefer-offline', ...args], project));
  const warnings = `${output.stdout}\n${output.stderr}`.split('\n').filter((line) => /\bwarn/i.test(line));
  check(warnings.length === 0, `installing the tarball printed warnings:\n${warnings.join('\n')}`);
}

async function writeConsumer(project: string): Promise<void> {
  await mkdir(join(project, 'src'));
  await writeFile(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
  await writeFile(join(project, 'tsconfig.skiplib.json'), JSON.stringify(TSCONFIG_SKIP_LIB_CHECK, null, 2));
  await writeFile(join(project, 'src', 'types.ts'), TYPES_TS);
  await writeFile(join(project, 'src', 'sample.ts'), SAMPLE_TS);
  await writeFile(join(project, 'src', 'require.cts'), REQUIRE_CTS);
}

/** Every shipped map carries the source it maps (src/ is not shipped). */
async function checkSourceMaps(installed: string): Promise<number> {
  const maps = (await readdir(join(installed, 'dist'), { recursive: true })).filter((f) => f.endsWith('.js.map'));
  check(maps.length > 0, 'no source maps shipped');
  for (const file of maps) {
    const map = JSON.parse(await readFile(join(installed, 'dist', file), 'utf8')) as {
      sources: string[];
      sourcesContent?: (string | null)[];
    };
    const complete = map.sources.length > 0 && map.sources.every((_, i) => typeof map.sourcesContent?.[i] === 'string');
    check(complete, `dist/${file} maps ${map.sources.join(', ')} without their content`);
  }
  return maps.length;
}

/** The runtime half, on one Node binary: require(), the bin, and the sample against the services. */
async function runOn(node: string, project: string, names: string[]): Promise<void> {
  const { stdout: version } = await run(node, ['--version'], { cwd: project });
  const label = `node ${version.trim()}`;
  await step(`${label}: require() every entry point from CommonJS, no unexpected warning`, async () => {
    const { stdout, stderr } = await run(node, ['out/require.cjs'], { cwd: project });
    check(stdout.startsWith('require ok'), `unexpected output: ${stdout}`);
    const unexpected = stderr.replace(REQUIRE_ESM_WARNING, '');
    check(unexpected === '', `require() printed to stderr:\n${unexpected}`);
  });
  const name = uniqueName('cvt_pkg');
  names.push(name);
  const env = { DATABASE_URL, AMQP_URL, SAMPLE_NAME: name };
  await step(`${label}: the installed converge bin migrates schema ${name}`, async () => {
    const bin = join(project, 'node_modules', 'converge-events', 'bin', 'converge.js');
    check(existsSync(join(project, 'node_modules', '.bin', 'converge')), 'npm linked no converge bin');
    const { stdout } = await run(node, [bin, '--schema', name, 'migrate'], { cwd: project, env });
    check(stdout.includes('applied migrations'), `unexpected output: ${stdout}`);
  });
  await step(`${label}: sample appends, relays and projects one event`, async () => {
    const { stdout } = await run(node, ['out/sample.js'], { cwd: project, env, timeoutMs: 60_000 });
    check(stdout.includes('sample ok'), `unexpected output: ${stdout}`);
  });
}

/** Drops what the runs created and proves it is gone; returns what is left. */
async function cleanUp(names: string[]): Promise<string[]> {
  if (names.length === 0) return [];
  const pool = await connectPostgres(1);
  const broker = await connectRabbit();
  try {
    await dropSchemas(pool, names);
    await dropBrokerNames(broker, names);
    return [
      ...(await existingSchemas(pool, names)).map((s) => `schema ${s}`),
      ...(await existingBrokerObjects(broker, names)),
    ];
  } finally {
    await pool.end();
    await broker.close();
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { node: { type: 'string', multiple: true } } });
  const nodes = values.node ?? [process.execPath];
  const started = Date.now();
  const scratch = await mkdtemp(join(tmpdir(), 'converge-package-'));
  const project = join(scratch, 'consumer');
  const names: string[] = [];
  let ok = false;
  try {
    await step('services: PostgreSQL and RabbitMQ answer', async () => {
      await (await connectPostgres(1)).end();
      await (await connectRabbit()).close();
    });
    const tarball = await step('npm pack: builds, ships dist + bin + LICENSE + CHANGELOG, no tests or bench', () =>
      pack(scratch),
    );
    await mkdir(project);
    await step('npm install the tarball into a scratch project, no warnings', () => install(project, tarball));
    await step('publint --strict', () => run(join(BIN, 'publint'), ['run', tarball, '--strict'], { cwd: scratch }));
    // cjs-resolves-to-esm is by design: Node >= 20.19 require()s the ESM build, and TypeScript >= 5.8
    // allows it under module nodenext; the CommonJS steps below check both for real.
    await step('attw (are the types wrong)', () =>
      run(join(BIN, 'attw'), [tarball, '--ignore-rules', 'cjs-resolves-to-esm', '--format', 'ascii'], { cwd: scratch }),
    );
    const installed = join(project, 'node_modules', 'converge-events');
    await step('source maps carry their sources', () => checkSourceMaps(installed));
    await writeConsumer(project);
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    await step('tsc: strict NodeNext ESM + CommonJS consumer, skipLibCheck false (emits out/)', () =>
      run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project }),
    );
    await step('tsc: the same with skipLibCheck true (tx and pool still typed)', () =>
      run(process.execPath, [tsc, '-p', 'tsconfig.skiplib.json'], { cwd: project }),
    );
    for (const node of nodes) await runOn(node, project, names);
    ok = true;
  } catch (err) {
    if (!(err instanceof StepFailed))
      console.log(`FAIL ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  } finally {
    const left = await cleanUp(names).catch((err: Error) => [`cleanup failed: ${err.message}`]);
    if (left.length > 0) {
      console.log(`FAIL cleanup: left behind ${left.join(', ')}`);
      ok = false;
    }
    if (!ok && process.env.CONVERGE_KEEP_FAILED === '1') console.log(`kept ${project}`);
    else await rm(scratch, { recursive: true, force: true });
  }
  console.log(`package test ${ok ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`package: ${passed} passed, ${ok ? 0 : 1} failed`);
  return ok ? 0 : 1;
}

process.exit(await main());
