/**
 * A PgBouncer in transaction pooling mode in front of the PostgreSQL at DATABASE_URL: the pooler
 * pass of the integration suite (`npm run test:pooler`) runs converge through it, where every
 * transaction may land on another server connection. `npm run services` starts it when nothing
 * answers at POOLER_DATABASE_URL and that address is local; chaos restarts it with restartPgBouncer.
 *
 * Its config, log and pidfile live in a directory of its own, /tmp/converge-pgbouncer-<port>, so a
 * restart from another process finds them by the port alone. PgBouncer refuses to run as root: as
 * root it is started with `-u postgres` and the directory belongs to that user.
 */
import { execFile } from 'node:child_process';
import {
  accessSync,
  chownSync,
  constants,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { PGBOUNCER, ensureDebianTools } from './debian-packages.js';

const run = promisify(execFile);

export const POOLER_DATABASE_URL = process.env.POOLER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:6432/test';

/** The unprivileged user PgBouncer runs as when started by root (Debian's PostgreSQL packages create it). */
const RUN_AS = 'postgres';
const READY_MS = 30_000;
const STOP_MS = 10_000;

export interface PgBouncerSetup {
  /** host:port the pooler listens on, for messages. */
  where: string;
  listenHost: string;
  listenPort: number;
  /** Where the server connections go: a host name or address, or a Unix-socket directory. */
  backendHost: string;
  backendPort: number;
  /** The backend's user: looks up the roles the auth file does not list (tests create login roles). */
  authUser: string;
  /** Loopback address: this machine may start it. */
  local: boolean;
  /** The backend URL is the pooler's own address (a command of the pooler pass): nothing to put in front. */
  frontsItself: boolean;
  dir: string;
}

function endpoint(url: string): { host: string; port: number; user: string } {
  // libpq allows an empty host after credentials (postgres://user@/db?host=/socket); WHATWG URL does not.
  const parsed = new URL(url.replace(/@\//, '@localhost/'));
  const host = parsed.searchParams.get('host') ?? (decodeURIComponent(parsed.hostname) || 'localhost');
  const port = Number(parsed.port || parsed.searchParams.get('port') || 5432);
  return { host: host.replace(/^\[|\]$/g, ''), port, user: decodeURIComponent(parsed.username) || 'postgres' };
}

/** The state directory of the PgBouncer listening on `port`. */
export function pgBouncerDir(port: number): string {
  return `/tmp/converge-pgbouncer-${port}`;
}

/** What the pooler at `poolerUrl` in front of `backendUrl` is, from the two URLs alone. */
export function pgBouncerSetup(poolerUrl: string, backendUrl: string): PgBouncerSetup {
  const pooler = endpoint(poolerUrl);
  const backend = endpoint(backendUrl);
  // The URL reaches PgBouncer over TCP, so only a loopback address is ours to start.
  const loopback = /^(localhost|::1|127(\.\d{1,3}){3})$/i.test(pooler.host);
  const address = (host: string) => (host.toLowerCase() === 'localhost' ? '127.0.0.1' : host);
  return {
    where: `${pooler.host}:${pooler.port}`,
    listenHost: address(pooler.host),
    listenPort: pooler.port,
    backendHost: backend.host,
    backendPort: backend.port,
    authUser: backend.user,
    local: loopback,
    frontsItself: address(pooler.host) === address(backend.host) && pooler.port === backend.port,
    dir: pgBouncerDir(pooler.port),
  };
}

/**
 * pgbouncer.ini for `setup`. `socketDir`: where it also listens on a Unix socket (`.s.PGSQL.<port>`),
 * as PostgreSQL itself does; the backend's own socket directory, so a URL that reaches the server
 * through its socket (`?host=/var/run/postgresql&port=<port>`) reaches the pooler with the pooler's
 * port. Empty: TCP only.
 */
export function pgBouncerIni(setup: PgBouncerSetup, socketDir = ''): string {
  const file = (name: string) => path.join(setup.dir, name);
  return [
    '[databases]',
    // Any database name the client asks for, on the backend server.
    `* = host=${setup.backendHost} port=${setup.backendPort}`,
    '',
    '[pgbouncer]',
    `listen_addr = ${setup.listenHost}`,
    `listen_port = ${setup.listenPort}`,
    `unix_socket_dir = ${socketDir}`,
    // The backend trusts local connections too; the auth file lists auth_user, and auth_user looks up
    // every other role (grants.test.ts and the lab connect as roles they create).
    'auth_type = trust',
    `auth_file = ${file('userlist.txt')}`,
    `auth_user = ${setup.authUser}`,
    'pool_mode = transaction',
    // Drops a LISTEN a relay at poolMode session left on a server connection: its notifications broke auth_query (08P01).
    'server_reset_query = UNLISTEN *',
    'server_reset_query_always = 1',
    'max_client_conn = 2000',
    // Server connections per database and user: beside the suite's direct connections, well under
    // PostgreSQL's max_connections (100 by default).
    'default_pool_size = 30',
    `logfile = ${file('pgbouncer.log')}`,
    `pidfile = ${file('pgbouncer.pid')}`,
    `admin_users = ${setup.authUser}`,
    // node-postgres sends none; other drivers (psql, JDBC) send extra_float_digits at startup.
    'ignore_startup_parameters = extra_float_digits',
    '',
  ].join('\n');
}

/** The auth file: the one user PgBouncer must know without asking the server. */
export function pgBouncerUsers(setup: PgBouncerSetup): string {
  return `"${setup.authUser.replaceAll('"', '""')}" ""\n`;
}

/** Connects and runs SELECT 1, rejecting with the driver's error; never waits more than 5 s for either. */
export async function ping(url: string): Promise<void> {
  // query_timeout: a pooler whose server is down holds the query (query_wait_timeout, 120 s).
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000, query_timeout: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Nothing (reachable) listens there, as opposed to a server that answered with an error. */
function notAnswering(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? '';
  if (['ECONNREFUSED', 'ENOENT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ETIMEDOUT'].includes(code)) return true;
  return err instanceof Error && /timeout|terminated unexpectedly/i.test(err.message);
}

function failure(err: unknown): string {
  return err instanceof Error ? err.message || (err as { code?: string }).code || err.name : String(err);
}

/**
 * Gets the pooler at `poolerUrl` answering: when nothing answers there and the address is local,
 * installs PgBouncer if missing (apt-get, as the other Debian tools), writes its config for
 * `backendUrl` and starts it. Returns what it did, for the services summary line.
 */
export async function preparePgBouncer(poolerUrl: string, backendUrl: string): Promise<string> {
  const setup = pgBouncerSetup(poolerUrl, backendUrl);
  const fail = (what: string, hint: string): never => {
    throw new Error(`PgBouncer at ${setup.where}: ${what}; ${hint}`);
  };
  const first = await ping(poolerUrl).then(
    () => undefined,
    (err: unknown) => err,
  );
  if (first === undefined) {
    const reloaded = setup.local && (await reloadIfChanged(setup, backendUrl));
    return `PgBouncer ${setup.where}${setup.local ? '' : ' (remote)'} ok${reloaded ? ', config changed: reloaded' : ''}`;
  }
  if (!notAnswering(first))
    fail(failure(first), 'something answers there but refuses the connection: check POOLER_DATABASE_URL');
  if (!setup.local) fail(`not answering (${failure(first)})`, 'start it, or point POOLER_DATABASE_URL at one');
  if (setup.frontsItself) fail('not answering, and DATABASE_URL names it too', 'point DATABASE_URL at PostgreSQL');
  const started = Date.now();
  const done: string[] = [];
  const installed = await ensureDebianTools([PGBOUNCER]).catch((err: unknown) => fail(failure(err), 'or start one'));
  if (installed.length > 0) done.push(`installed ${installed.join(', ')}`);
  await writeConfig(setup, await socketDirFor(setup, backendUrl));
  await start(setup, poolerUrl).catch((err: unknown) => fail(failure(err), `see ${setup.dir}/pgbouncer.log`));
  done.push(`started (transaction pooling to ${setup.backendHost}:${setup.backendPort}, ${seconds(started)} s)`);
  return `PgBouncer ${setup.where} ${done.join(', ')}`;
}

/**
 * Stops the local PgBouncer of `poolerUrl` (SIGTERM, its immediate shutdown: every client loses its
 * connection; SIGKILL if it lingers) and waits until its port is free. False when none was running.
 */
export async function stopPgBouncer(poolerUrl: string): Promise<boolean> {
  const setup = pgBouncerSetup(poolerUrl, poolerUrl);
  const pid = runningPid(setup);
  if (pid === undefined) return false;
  process.kill(pid, 'SIGTERM');
  if (!(await until(() => !alive(pid), STOP_MS))) {
    process.kill(pid, 'SIGKILL');
    await until(() => !alive(pid), STOP_MS);
  }
  rmSync(path.join(setup.dir, 'pgbouncer.pid'), { force: true });
  if (!(await until(async () => !(await listening(setup)), STOP_MS)))
    throw new Error(`PgBouncer at ${setup.where}: pid ${pid} ended but the port is still taken`);
  return true;
}

/** Stops the local PgBouncer of `poolerUrl` and starts it again from the config preparePgBouncer wrote. */
export async function restartPgBouncer(poolerUrl: string): Promise<void> {
  const setup = pgBouncerSetup(poolerUrl, poolerUrl);
  if (!existsSync(path.join(setup.dir, 'pgbouncer.ini')))
    throw new Error(`PgBouncer at ${setup.where}: no config in ${setup.dir}; run \`npm run services\` first`);
  await stopPgBouncer(poolerUrl);
  await start(setup, poolerUrl);
}

/** A PgBouncer started earlier keeps its config: a changed one (a new checkout) is rewritten and re-read (SIGHUP). */
async function reloadIfChanged(setup: PgBouncerSetup, backendUrl: string): Promise<boolean> {
  const iniFile = path.join(setup.dir, 'pgbouncer.ini');
  const pid = runningPid(setup);
  if (pid === undefined || !existsSync(iniFile)) return false;
  const socketDir = await socketDirFor(setup, backendUrl);
  if (readFileSync(iniFile, 'utf8') === pgBouncerIni(setup, socketDir)) return false;
  await writeConfig(setup, socketDir);
  process.kill(pid, 'SIGHUP');
  return true;
}

/** The pid in the pid file of the kit's PgBouncer, if that process is alive. */
function runningPid(setup: PgBouncerSetup): number | undefined {
  const pidFile = path.join(setup.dir, 'pgbouncer.pid');
  const pid = Number(existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim() : NaN);
  return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : undefined;
}

async function writeConfig(setup: PgBouncerSetup, socketDir: string): Promise<void> {
  const owner = await runAs();
  mkdirSync(setup.dir, { recursive: true, mode: 0o755 });
  writeFileSync(path.join(setup.dir, 'pgbouncer.ini'), pgBouncerIni(setup, socketDir));
  writeFileSync(path.join(setup.dir, 'userlist.txt'), pgBouncerUsers(setup));
  if (owner)
    for (const name of ['', 'pgbouncer.ini', 'userlist.txt'])
      chownSync(path.join(setup.dir, name), owner.uid, owner.gid);
}

/**
 * The backend's first socket directory when PgBouncer may create its socket there (the directory
 * belongs to the user it runs as, or we may write to it), else '' (TCP only).
 */
async function socketDirFor(setup: PgBouncerSetup, backendUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: backendUrl, connectionTimeoutMillis: 5000, query_timeout: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ dirs: string }>("SELECT current_setting('unix_socket_directories') AS dirs");
    const dir = rows[0]!.dirs.split(',')[0]!.trim();
    if (!dir.startsWith('/')) return '';
    const owner = await runAs();
    if (owner) return statSync(dir).uid === owner.uid ? dir : '';
    accessSync(dir, constants.W_OK);
    return dir;
  } catch {
    return '';
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** As root, the user PgBouncer runs as and owns its directory; otherwise undefined (it runs as we do). */
async function runAs(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', RUN_AS]), run('id', ['-g', RUN_AS])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    throw new Error(`PgBouncer refuses to run as root and there is no user ${RUN_AS} to run it as`);
  }
}

/**
 * Starts the daemon (-d: it forks and the command returns) and waits until a query goes through it.
 * A start that fails because another run started one meanwhile (its pidfile, its port) is fine once
 * that one answers.
 */
async function start(setup: PgBouncerSetup, poolerUrl: string): Promise<void> {
  const asUser = process.getuid?.() === 0 ? ['-u', RUN_AS] : [];
  const startError = await run(PGBOUNCER.path, ['-d', ...asUser, path.join(setup.dir, 'pgbouncer.ini')], {
    timeout: READY_MS,
  }).then(
    () => undefined,
    (err: unknown) => err,
  );
  let last: unknown;
  const up = await until(
    () =>
      ping(poolerUrl).then(
        () => true,
        (err: unknown) => ((last = err), false),
      ),
    startError === undefined ? READY_MS : 3000,
  );
  if (up) return;
  if (startError !== undefined) {
    const output = (startError as { stderr?: string }).stderr?.trim().split('\n').slice(-3).join(' ');
    throw new Error(`\`pgbouncer -d\` failed: ${output || failure(startError)}${logTail(setup)}`);
  }
  throw new Error(`not answering ${READY_MS / 1000} s after it started (${failure(last)})${logTail(setup)}`);
}

function logTail(setup: PgBouncerSetup): string {
  try {
    const lines = readFileSync(path.join(setup.dir, 'pgbouncer.log'), 'utf8').trim().split('\n');
    return `; its log ends: ${lines.slice(-3).join(' | ')}`;
  } catch {
    return '';
  }
}

function alive(pid: number): boolean {
  try {
    // A daemon that ended stays a zombie until init reaps it, and kill(pid, 0) still finds that.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function listening(setup: PgBouncerSetup): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: setup.listenHost, port: setup.listenPort });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}
