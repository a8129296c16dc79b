import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type pg from 'pg';
import { cliNodeArgs } from './cli-bundle.js';
import { after, before, connectPostgres, DATABASE_URL, uniqueName } from './rig.js';

/** Starts `converge` (src/, bundled: cli-bundle.ts) against the test database; the caller owns the child process. */
export function runCli(args: string[]): ChildProcess {
  return spawn(process.execPath, [...cliNodeArgs(), '--database-url', DATABASE_URL, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, CONVERGE_LOG_LEVEL: 'warn' },
  });
}

/** Runs `converge` to completion and returns its exit code and output. */
export async function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runCli(args);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/**
 * The fixture of the CLI test files: one schema name the CLI is pointed at, and a pool to look at
 * what it did; the schema is dropped and the pool closed after the file. Call at module level.
 */
export function cliSchema(): { schema: string; pool: () => pg.Pool } {
  const schema = uniqueName('cvt_cli');
  let pool: pg.Pool | undefined;
  before(async () => {
    pool = await connectPostgres();
  });
  after(async () => {
    await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool?.end();
  });
  return {
    schema,
    pool: () => {
      if (!pool) throw new Error('cliSchema: the pool exists only inside tests');
      return pool;
    },
  };
}
