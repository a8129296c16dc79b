/**
 * `tsx scripts/local-env.ts [--in-process] -- <command> [args]`: what `npm run lab` and `npm run demo`
 * run first.
 *
 * - A configured service (DATABASE_URL / AMQP_URL set) is got ready as `npm run services` does: a
 *   local one is started when it does not answer, the database created, the plugin enabled. If that
 *   fails, the command does not run: a configured address is never silently replaced.
 * - The default address (127.0.0.1:5432 / :5672) is only probed, never started: a service that
 *   answers there is used (database created, plugin enabled); when nothing answers, a stand-in is:
 *   - PostgreSQL: an embedded PostgreSQL 18 (kit/embedded-postgres.ts) in a temporary directory,
 *     removed when the command ends, fails or is interrupted;
 *   - RabbitMQ: the in-process transport (a broker in memory, in the command's own process) for
 *     programs that accept it (`--in-process`: the lab and the demo); for others a clear error
 *     (scripts/env/choice.ts).
 *   So stopped local services stay stopped, and the stand-ins are what a machine without them gets.
 *
 * Prints one line saying what runs where, then runs the command with DATABASE_URL and AMQP_URL set
 * (and CONVERGE_TRANSPORT=in-process when chosen), and exits as it did.
 *
 * CONVERGE_PROBE_DATABASE_URL / CONVERGE_PROBE_AMQP_URL replace the default addresses probed (for
 * the test that points the probe at a closed port; the library never reads them).
 */
import { EmbeddedPostgres } from '../kit/embedded-postgres.js';
import { deferSignals, exitLike, runChild, type ChildExit } from './env/child.js';
import {
  IN_PROCESS_TRANSPORT_AVAILABLE,
  chooseBroker,
  choosePostgres,
  describeChoice,
  type Probe,
} from './env/choice.js';
import { serverVersion } from './env/postgres.js';
import { amqpTarget, postgresTarget, preparePostgres, prepareRabbit, type PrepareOptions } from './services.js';

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
const DEFAULT_AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';

/** Tries the configured address (starting a local service as `npm run services` does) or probes the default one. */
async function probe(
  configuredUrl: string | undefined,
  probeUrl: string,
  where: (url: string) => string,
  prepare: (url: string, options: PrepareOptions) => Promise<string>,
): Promise<Probe> {
  const url = configuredUrl ?? probeUrl;
  const base = { configuredUrl, probeUrl, where: where(url) };
  return prepare(url, { start: configuredUrl !== undefined }).then(
    () => ({ ...base, reachable: true }),
    (err: unknown) => ({ ...base, reachable: false, failure: (err as Error).message }),
  );
}

function fail(message: string): never {
  process.stderr.write(`local-env: ${message}\n`);
  process.exit(1);
}

const argv = process.argv.slice(2);
const inProcess = argv[0] === '--in-process';
const rest = inProcess ? argv.slice(1) : argv;
if (rest[0] !== '--' || rest.length < 2) fail('usage: tsx scripts/local-env.ts [--in-process] -- <command> [args]');
const command = rest.slice(1);
// A question about the command's flags needs no services: ask it straight away.
if (command.includes('--help') || command.includes('-h')) exitLike(await runChild(command, {}));

// Blank values count as unset, as in a shell `DATABASE_URL= npm run lab`.
const configured = (name: string) => process.env[name] || undefined;
const [pgProbe, amqpProbe] = await Promise.all([
  probe(
    configured('DATABASE_URL'),
    configured('CONVERGE_PROBE_DATABASE_URL') ?? DEFAULT_DATABASE_URL,
    (url) => postgresTarget(url).where,
    preparePostgres,
  ),
  probe(
    configured('AMQP_URL'),
    configured('CONVERGE_PROBE_AMQP_URL') ?? DEFAULT_AMQP_URL,
    (url) => amqpTarget(url).where,
    prepareRabbit,
  ),
]);
const postgres = choosePostgres(pgProbe);
const broker = chooseBroker(amqpProbe, { accepted: inProcess, available: IN_PROCESS_TRANSPORT_AVAILABLE });
// Both decided before anything starts: a missing broker must not cost an initdb first.
if (postgres.use === 'none') fail(postgres.reason);
if (broker.use === 'none') fail(broker.reason);

// A signal only records itself: the embedded server is removed below, not mid-start.
const interrupted = deferSignals();

let embedded: EmbeddedPostgres | undefined;
let exit: ChildExit = { code: 1, signal: null };
try {
  const env: NodeJS.ProcessEnv = {};
  let pgLine: string;
  if (postgres.use === 'embedded') {
    const started = Date.now();
    embedded = await EmbeddedPostgres.start({ signals: false }).catch((err: unknown) =>
      fail(
        `no PostgreSQL reachable at ${pgProbe.where}, and the embedded one did not start: ${(err as Error).message}`,
      ),
    );
    env.DATABASE_URL = embedded.url;
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    pgLine = `embedded ${await serverVersion(embedded.url)} (temporary, removed at exit; started in ${seconds} s)`;
  } else {
    env.DATABASE_URL = postgres.url;
    pgLine = pgProbe.where;
  }
  if (broker.use === 'rabbitmq') env.AMQP_URL = broker.url;
  else env.CONVERGE_TRANSPORT = 'in-process';
  process.stderr.write(
    `${describeChoice(
      pgLine,
      broker.use === 'rabbitmq' ? amqpProbe.where : `in-process (no broker reachable at ${amqpProbe.where})`,
    )}\n`,
  );
  const signal = interrupted();
  if (signal) exit = { code: null, signal };
  else exit = await runChild(command, env);
} finally {
  await embedded?.stop();
}
exitLike(exit);
