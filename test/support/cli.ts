import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { DATABASE_URL } from './rig.js';

const CLI = ['--import', 'tsx', 'src/cli/main.ts'];

/** Starts `converge` from source against the test database; the caller owns the child process. */
export function runCli(args: string[]): ChildProcess {
  return spawn(process.execPath, [...CLI, '--database-url', DATABASE_URL, ...args], {
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
