/**
 * Runs a command as a child with extra environment, for the launchers that own a service the
 * child uses (an embedded PostgreSQL): the child gets SIGINT/SIGTERM and its own cleanup runs
 * against a server that is still up; the launcher removes the server only after the child ended.
 */
import { spawn } from 'node:child_process';

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Signals the launcher received while the child ran, so it can end the same way afterwards. */
export async function runChild(
  command: string[],
  env: NodeJS.ProcessEnv,
): Promise<ChildExit & { received?: NodeJS.Signals }> {
  const [file, ...args] = command;
  if (!file) throw new Error('no command given (usage: ... -- <command> [args])');
  const child = spawn(file, args, { stdio: 'inherit', env: { ...process.env, ...env } });
  let received: NodeJS.Signals | undefined;
  // Ctrl-C reaches the child too (same process group); a signal sent to the launcher alone is passed on.
  const forward = (signal: NodeJS.Signals) => {
    received = signal;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  try {
    return await new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve({ code, signal, received }));
    });
  } finally {
    process.off('SIGINT', forward);
    process.off('SIGTERM', forward);
  }
}

/**
 * From now on SIGINT/SIGTERM only record themselves: a launcher interrupted while it starts its
 * server must still remove it (a signal's default action would skip every cleanup). Returns the
 * first signal received, if any; exitLike() ends the process with it.
 */
export function deferSignals(): () => NodeJS.Signals | undefined {
  let received: NodeJS.Signals | undefined;
  const record = (signal: NodeJS.Signals) => (received ??= signal);
  process.on('SIGINT', record);
  process.on('SIGTERM', record);
  return () => received;
}

/** Ends the launcher as the child ended: its exit code, or its signal re-raised on ourselves. */
export function exitLike(exit: ChildExit): never {
  if (exit.signal) {
    // Our own handlers would swallow it: the default action must end the process.
    process.removeAllListeners(exit.signal);
    process.kill(process.pid, exit.signal);
  }
  process.exit(exit.code ?? 1);
}
