/**
 * `npm run services`: gets the PostgreSQL and RabbitMQ that the tests, the lab, the bench, chaos and
 * the drift scenario use ready, so `npm ci && npm test` passes on a machine where both are installed.
 * Those npm scripts (and .ci/run) run it first; when everything is up it only connects and checks.
 *
 * For a local service (loopback host or Unix socket in DATABASE_URL / AMQP_URL, or the defaults):
 * starts it when it does not answer, creates the database when missing, enables the consistent-hash
 * plugin. A remote one is only checked. Prints one line on stderr; exits 1 with what to do on failure.
 * CDC_DATABASE_URL (default 127.0.0.1:5433) is a PostgreSQL with wal_level=logical for the CDC relay:
 * locally a second cluster, created when missing (prepareLogicalPostgres). POOLER_DATABASE_URL (default
 * 127.0.0.1:6432) is a PgBouncer in transaction mode in front of DATABASE_URL, for the pooler pass
 * (`npm run test:pooler`): started once PostgreSQL answers, when it is local and not up (kit/pgbouncer.ts).
 *
 *   tsx scripts/services.ts                    prepare both
 *   tsx scripts/services.ts --is-local amqp    exit 0 if AMQP_URL is local (for .ci/run), else 1
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import amqp from 'amqplib';
import pg from 'pg';
import { POOLER_DATABASE_URL, pgBouncerSetup, ping, preparePgBouncer } from '../kit/pgbouncer.js';
import { AMQP_URL, CDC_DATABASE_URL, DATABASE_URL, queryOnce, redactUrl } from '../kit/services.js';
import { BrokerPluginMissingError } from '../src/runtime/errors.js';
import { CONSISTENT_HASH, probeExchangeType } from '../src/transport/topology.js';

const run = promisify(execFile);
const WAIT_MS = Number(process.env.SERVICES_WAIT_SECONDS ?? 90) * 1000;

export interface Target {
  /** host:port, or the socket directory, for messages. */
  where: string;
  host: string;
  port: number;
  local: boolean;
}

export interface PostgresTarget extends Target {
  database: string;
}

/** Loopback addresses and Unix-socket directories: services this machine can start and configure. */
export function isLocalHost(host: string): boolean {
  const bare = host.toLowerCase().replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare) || bare.startsWith('/');
}

/** libpq allows an empty host after credentials (postgres://user@/db?host=/socket); WHATWG URL does not. */
function pgUrl(url: string): URL {
  return new URL(url.replace(/@\//, '@localhost/'));
}

/** What a libpq-style URL points at; pg's defaults fill the gaps (localhost, 5432, database = user). */
export function postgresTarget(url: string): PostgresTarget {
  const parsed = pgUrl(url);
  const host = parsed.searchParams.get('host') ?? (decodeURIComponent(parsed.hostname) || 'localhost');
  const port = Number(parsed.port || parsed.searchParams.get('port') || 5432);
  const user = decodeURIComponent(parsed.username) || 'postgres';
  const database = decodeURIComponent(parsed.pathname.slice(1)) || user;
  return { where: `${host}:${port}`, host, port, local: isLocalHost(host), database };
}

export function amqpTarget(url: string): Target {
  const parsed = new URL(url);
  const host = parsed.hostname || 'localhost';
  const port = Number(parsed.port || (parsed.protocol === 'amqps:' ? 5671 : 5672));
  return { where: `${host}:${port}`, host, port, local: isLocalHost(host) };
}

/** Errors that mean "nothing listens there (yet)", as opposed to a refusal by a running server. */
export function isNotRunning(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  // 57P03: the server is starting up or shutting down; ECONNRESET/abrupt close: a broker still booting.
  if (['ECONNREFUSED', 'ENOENT', 'ECONNRESET', '57P03'].includes(code as string)) return true;
  return err instanceof Error && /closed abruptly|Socket closed|ETIMEDOUT/.test(err.message);
}

class ServiceError extends Error {}

/** The service is up, but not at the address tried: waiting longer cannot help. */
class ElsewhereError extends ServiceError {}

function parsed<T>(url: string, name: string, parse: (url: string) => T): T {
  try {
    return parse(url);
  } catch {
    throw new ServiceError(`${name} is not a valid URL`);
  }
}

/** How often a wait asks whether the service is up but somewhere else (each ask starts a CLI tool). */
const ELSEWHERE_EVERY_MS = 5000;

/**
 * Polls `attempt` until it stops failing with "not running", up to SERVICES_WAIT_SECONDS. `elsewhere`
 * says when waiting is pointless (the service is up but does not listen at the address tried): it
 * returns why, and the wait ends with that instead of running out the clock.
 */
async function waitUntilUp<T>(
  attempt: () => Promise<T>,
  service: string,
  elsewhere: () => Promise<string | undefined> = async () => undefined,
): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  let nextElsewhereCheck = 0;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (!isNotRunning(err)) throw err;
      if (Date.now() >= nextElsewhereCheck) {
        const why = await elsewhere();
        if (why !== undefined) throw new ElsewhereError(why);
        nextElsewhereCheck = Date.now() + ELSEWHERE_EVERY_MS;
      }
      if (Date.now() > deadline)
        throw new ServiceError(`${service} still not answering after ${WAIT_MS / 1000}s (${message(err)})`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message || (err as { code?: string }).code || err.name : String(err);
}

/** Runs a command; ENOENT becomes "not installed here" so the caller can say how else to start it. */
async function command(file: string, args: string[]): Promise<void> {
  try {
    await run(file, args, { timeout: WAIT_MS });
  } catch (err) {
    const failure = err as NodeJS.ErrnoException & { stderr?: string; stdout?: string };
    if (failure.code === 'ENOENT') throw new ServiceError(`${file} is not installed on this machine`);
    const output = `${failure.stderr ?? ''}${failure.stdout ?? ''}`.trim().split('\n').slice(-3).join(' ');
    throw new ServiceError(`\`${file} ${args.join(' ')}\` failed: ${output || message(err)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

interface Cluster {
  version: string;
  name: string;
  port: number;
}

/** Debian's clusters (pg_lsclusters): version, name, port. */
async function localClusters(): Promise<Cluster[]> {
  let clusters: string;
  try {
    clusters = (await run('pg_lsclusters', ['--no-header'])).stdout;
  } catch {
    throw new ServiceError('pg_lsclusters is not installed on this machine, so no local cluster can be started');
  }
  return clusters
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 3)
    .map(([version, name, port]) => ({ version: version!, name: name!, port: Number(port) }));
}

/** The local cluster serving `port`, started with Debian's pg_ctlcluster (as the CI script always did). */
async function startPostgres(target: PostgresTarget): Promise<void> {
  const cluster = (await localClusters()).find((candidate) => candidate.port === target.port);
  if (!cluster) throw new ServiceError(`no local cluster listens on port ${target.port} (see pg_lsclusters)`);
  await startCluster(cluster);
}

async function startCluster({ version, name }: Cluster): Promise<void> {
  // Exit code 2 is "already running": another run started it meanwhile, so waiting is right.
  await command('pg_ctlcluster', ['--skip-systemctl-redirect', version, name, 'start']).catch((err: unknown) => {
    if (!/already running/i.test(message(err))) throw err;
  });
}

async function createDatabase(url: string, database: string): Promise<void> {
  const maintenance = pgUrl(url);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString(), connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
  } catch (err) {
    // 42P04: a concurrent run created it first.
    if ((err as { code?: unknown }).code !== '42P04') throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface PrepareOptions {
  /**
   * Start a local service that does not answer (default true). The lab and the demo pass false for
   * the default address they only probe: nothing answering there means "use the embedded stand-in".
   */
  start?: boolean;
}

/** Returns what it did, for the summary line. */
export async function preparePostgres(url: string, options: PrepareOptions = {}): Promise<string> {
  const target = parsed(url, 'DATABASE_URL', postgresTarget);
  const done: string[] = [];
  const fail = (what: string, hint: string): never => {
    throw new ServiceError(`PostgreSQL at ${redactUrl(url)}: ${what}; ${hint}`);
  };
  const first = await ping(url).then(
    () => undefined,
    (err: unknown) => err,
  );
  let missing = (first as { code?: unknown } | undefined)?.code === '3D000';
  if (first !== undefined && isNotRunning(first)) {
    if (!target.local) fail(`not answering (${message(first)})`, 'start it, or point DATABASE_URL at a running server');
    if (options.start === false) fail(`not answering (${message(first)})`, 'start it, or set DATABASE_URL');
    const started = Date.now();
    await startPostgres(target).catch((err: unknown) =>
      fail(
        `not answering and could not be started: ${message(err)}`,
        'start it yourself (docker compose up -d --wait)',
      ),
    );
    missing = await waitUntilUp(() => ping(url), 'PostgreSQL').then(
      () => false,
      (err: unknown) => ((err as { code?: unknown }).code === '3D000' ? true : fail(message(err), 'see its log')),
    );
    done.push(`started (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } else if (first !== undefined && !missing) {
    fail(message(first), 'check the user, password and database in DATABASE_URL');
  }
  if (missing) {
    if (!target.local) fail(`database ${target.database} does not exist`, 'create it (createdb) on that server');
    await createDatabase(url, target.database).catch((err: unknown) =>
      fail(`cannot create database ${target.database}: ${message(err)}`, `create it with createdb ${target.database}`),
    );
    await ping(url);
    done.push(`created database ${target.database}`);
  }
  return `PostgreSQL ${target.where}/${target.database}${target.local ? '' : ' (remote)'} ${done.join(', ') || 'ok'}`;
}

/** The cluster `npm run services` creates for CDC_DATABASE_URL: the only one it ever reconfigures. */
export const LOGICAL_CLUSTER = 'converge-logical';

/**
 * CDC_DATABASE_URL: a PostgreSQL with wal_level=logical. Locally, where no cluster listens on its
 * port, a cluster of the newest installed version is created there (pg_createcluster, trust auth as
 * the shared one, wal_level=logical) and started; the shared cluster is never touched. A cluster of
 * that name found with another wal_level is switched to logical and restarted; any other is an error.
 */
export async function prepareLogicalPostgres(url: string): Promise<string> {
  const target = parsed(url, 'CDC_DATABASE_URL', postgresTarget);
  const fail = (what: string, hint: string): never => {
    throw new ServiceError(`PostgreSQL for CDC at ${redactUrl(url)}: ${what}; ${hint}`);
  };
  const done: string[] = [];
  const first = await ping(url).then(
    () => undefined,
    (err: unknown) => err,
  );
  if (first !== undefined && isNotRunning(first) && target.local) {
    const created = await createLogicalClusterIfMissing(target).catch((err: unknown) =>
      fail(`not answering, and no cluster could be made for it: ${message(err)}`, 'set CDC_DATABASE_URL'),
    );
    if (created) done.push(created);
  }
  const prepared = await preparePostgres(url).catch((err: unknown) => fail(message(err), 'see above'));
  if ((await walLevel(url)) !== 'logical') {
    const cluster = (await localClusters().catch(() => [])).find((candidate) => candidate.port === target.port);
    if (!target.local || cluster?.name !== LOGICAL_CLUSTER)
      fail(
        'wal_level is not logical',
        'set wal_level = logical on that server and restart it, or set CDC_DATABASE_URL',
      );
    await setLogical(url, cluster!);
    done.push('wal_level set to logical (restarted)');
  }
  return `${prepared.replace(/^PostgreSQL/, 'PostgreSQL (CDC)')}${done.length ? `, ${done.join(', ')}` : ''}`;
}

async function walLevel(url: string): Promise<string> {
  const [row] = await queryOnce<{ wal_level: string }>(url, 'SHOW wal_level');
  return row!.wal_level;
}

/** Returns what it did, or undefined when a cluster already listens on the port (it is started as usual). */
async function createLogicalClusterIfMissing(target: PostgresTarget): Promise<string | undefined> {
  const clusters = await localClusters();
  if (clusters.some((cluster) => cluster.port === target.port)) return undefined;
  const version = await newestInstalledVersion(clusters);
  await command('pg_createcluster', [
    version,
    LOGICAL_CLUSTER,
    '--port',
    String(target.port),
    '--start',
    '-o',
    'wal_level=logical',
    '--',
    '--auth=trust',
  ]);
  return `created cluster ${version}/${LOGICAL_CLUSTER} with wal_level=logical`;
}

async function newestInstalledVersion(clusters: Cluster[]): Promise<string> {
  const installed = await readdir('/usr/lib/postgresql').catch(() => clusters.map((cluster) => cluster.version));
  const newest = installed.filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new ServiceError('no PostgreSQL server is installed under /usr/lib/postgresql');
  return newest;
}

async function setLogical(url: string, cluster: Cluster): Promise<void> {
  await queryOnce(url, 'ALTER SYSTEM SET wal_level = logical');
  await command('pg_ctlcluster', ['--skip-systemctl-redirect', cluster.version, cluster.name, 'restart']);
  await waitUntilUp(() => ping(url), 'PostgreSQL (CDC)');
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ
// ---------------------------------------------------------------------------------------------

async function connect(url: string): Promise<amqp.ChannelModel> {
  const connection = await amqp.connect(url, { timeout: 5000 });
  connection.on('error', () => undefined); // a refused probe closes it; the probe reports why
  return connection;
}

/** Resolves when the broker knows the consistent-hash type; rejects with BrokerPluginMissingError if not. */
async function probePlugin(url: string): Promise<void> {
  const connection = await connect(url);
  try {
    await probeExchangeType(connection, `converge.services.probe.${randomBytes(4).toString('hex')}`);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** The AMQP ports the local node listens on, or undefined while it is not up (booting, stopped, no CLI). */
async function localAmqpPorts(): Promise<number[] | undefined> {
  try {
    const { stdout } = await run('rabbitmq-diagnostics', ['-q', 'listeners'], { timeout: 15_000 });
    return [...stdout.matchAll(/port: (\d+), protocol: amqp\b/g)].map((match) => Number(match[1]));
  } catch {
    return undefined;
  }
}

/** Why waiting for `target` is pointless: the local node is up, but its AMQP listeners are elsewhere. */
async function rabbitListensElsewhere(target: Target): Promise<string | undefined> {
  const ports = await localAmqpPorts();
  if (ports === undefined || ports.includes(target.port)) return undefined;
  return `the local RabbitMQ node is running but accepts AMQP on ${ports.join(', ') || 'no port'}, not on ${target.port}`;
}

export async function prepareRabbit(url: string, options: PrepareOptions = {}): Promise<string> {
  const target = parsed(url, 'AMQP_URL', amqpTarget);
  const done: string[] = [];
  const fail = (what: string, hint: string): never => {
    throw new ServiceError(`RabbitMQ at ${redactUrl(url)}: ${what}; ${hint}`);
  };
  const first = await probePlugin(url).then(
    () => undefined,
    (err: unknown) => err,
  );
  let pluginMissing = first instanceof BrokerPluginMissingError;
  if (first !== undefined && isNotRunning(first)) {
    if (!target.local) fail(`not answering (${message(first)})`, 'start it, or point AMQP_URL at a running broker');
    if (options.start === false) fail(`not answering (${message(first)})`, 'start it, or set AMQP_URL');
    const started = Date.now();
    const startError = await command('rabbitmq-server', ['-detached']).then(
      () => undefined,
      (err: unknown) => err,
    );
    const cannot = (why: unknown, hint: string): never =>
      fail(`not answering and could not be started: ${message(why)}`, hint);
    // -detached returns before the node boots, so a failure here is the launcher's (not installed, not root);
    // "already running" means another run started it meanwhile, and waiting settles that.
    if (startError !== undefined && !/already running/i.test(message(startError)))
      cannot(startError, 'start it yourself (e.g. docker compose up -d --wait), or set AMQP_URL');
    pluginMissing = await waitUntilUp(
      () => probePlugin(url),
      'RabbitMQ',
      () => rabbitListensElsewhere(target),
    ).then(
      () => false,
      (err: unknown) =>
        err instanceof BrokerPluginMissingError ||
        (err instanceof ElsewhereError && fail(err.message, 'point AMQP_URL at a port it serves')) ||
        cannot(err, 'see its log (rabbitmq-diagnostics log_location) or start it yourself'),
    );
    done.push(`started (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } else if (first !== undefined && !pluginMissing) {
    fail(message(first), 'check the user, password and vhost in AMQP_URL');
  }
  if (pluginMissing) {
    const enable = `rabbitmq-plugins enable ${CONSISTENT_HASH.plugin}`;
    if (!target.local) fail(`the ${CONSISTENT_HASH.plugin} plugin is not enabled`, `run on the broker: ${enable}`);
    await command('rabbitmq-plugins', ['enable', '--quiet', CONSISTENT_HASH.plugin]).catch((err: unknown) =>
      fail(`the ${CONSISTENT_HASH.plugin} plugin is not enabled and enabling it failed: ${message(err)}`, enable),
    );
    await probePlugin(url).catch((err: unknown) =>
      fail(
        `${CONSISTENT_HASH.plugin} was enabled on the local node but this broker still lacks it (${message(err)})`,
        `set RABBITMQ_NODENAME to its node, or run ${enable} where it runs`,
      ),
    );
    done.push(`enabled ${CONSISTENT_HASH.plugin}`);
  }
  return `RabbitMQ ${target.where}${target.local ? '' : ' (remote)'} ${done.join(', ') || 'ok'}`;
}

// ---------------------------------------------------------------------------------------------
// PgBouncer
// ---------------------------------------------------------------------------------------------

/**
 * The pooler goes up once its PostgreSQL answers (its start waits for a query through it). When
 * DATABASE_URL is the pooler itself (a command of the pooler pass runs this script), there is
 * nothing behind it to configure: the PostgreSQL line already checked it.
 */
async function withPooler(postgres: string, url: string, poolerUrl: string): Promise<string> {
  const pooler = parsed(poolerUrl, 'POOLER_DATABASE_URL', (value) => pgBouncerSetup(value, url));
  if (pooler.frontsItself) return postgres;
  return `${postgres}; ${await preparePgBouncer(poolerUrl, url)}`;
}

// ---------------------------------------------------------------------------------------------

async function main(args: string[]): Promise<number> {
  if (args[0] === '--is-local') {
    const target = args[1] === 'amqp' ? amqpTarget(AMQP_URL) : postgresTarget(DATABASE_URL);
    return target.local ? 0 : 1;
  }
  const results = await Promise.allSettled([
    preparePostgres(DATABASE_URL).then(async (done) => withPooler(done, DATABASE_URL, POOLER_DATABASE_URL)),
    prepareRabbit(AMQP_URL),
    prepareLogicalPostgres(CDC_DATABASE_URL),
  ]);
  const failures = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
  if (failures.length === 0) {
    process.stderr.write(`services: ${results.map((r) => (r as PromiseFulfilledResult<string>).value).join('; ')}\n`);
    return 0;
  }
  for (const failure of failures) process.stderr.write(`services: ${message(failure)}\n`);
  return 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = await main(process.argv.slice(2));
