import { Command, Option } from 'commander';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { ConvergeError } from '../runtime/errors.js';
import { describeError } from '../runtime/logger.js';
import { commandContext, type CommandContext } from './context.js';
import { LOCAL_DATABASE_URL } from './env.js';
import { packageVersion } from './version.js';
import { registerCdc } from './commands/cdc.js';
import { registerCleanup, registerMaintain } from './commands/cleanup.js';
import { registerCompaction } from './commands/compaction.js';
import { registerCompat } from './commands/compat.js';
import { registerDashboard } from './commands/dashboard.js';
import { registerDlq } from './commands/dlq.js';
import { registerGaps } from './commands/gaps.js';
import { registerMetrics } from './commands/metrics.js';
import { registerOutbox } from './commands/outbox.js';
import { registerReconcile } from './commands/reconcile.js';
import { registerRelay } from './commands/relay.js';
import { registerSchema } from './commands/schema.js';
import { registerStatus } from './commands/status.js';
import { registerTopology } from './commands/topology.js';

/** Each command group adds its commands to the program; the order here is the order of `converge --help`. */
const COMMAND_GROUPS: ((program: Command, context: CommandContext) => void)[] = [
  registerSchema,
  registerRelay,
  registerCdc,
  registerTopology,
  registerStatus,
  registerGaps,
  registerReconcile,
  registerMetrics,
  registerDashboard,
  registerCleanup,
  registerMaintain,
  registerCompaction,
  registerOutbox,
  registerDlq,
  registerCompat,
];

/** The `converge` program with every command registered; building it touches no service and reads no environment. */
export function createProgram(): Command {
  const program = new Command()
    .name('converge')
    .description('Transactional outbox relay and operations for converge')
    .version(packageVersion(), '-V, --version', 'print the converge-events version')
    .option(
      '--database-url <url>',
      `PostgreSQL connection string (default: env DATABASE_URL, else ${LOCAL_DATABASE_URL}, said on stderr)`,
    )
    .option(
      '--schema <name>',
      'schema holding converge tables; relay and status take several, comma-separated (a schema per tenant)',
      DEFAULT_SCHEMA,
    )
    .addOption(
      new Option(
        '--pool-mode <mode>',
        'session: DATABASE_URL reaches PostgreSQL directly or through a session-mode pooler; transaction: through a transaction-mode pooler such as PgBouncer (no named prepared statements, no LISTEN)',
      )
        .choices(['session', 'transaction'])
        .env('CONVERGE_POOL_MODE')
        .default('session'),
    );
  const context = commandContext(program);
  for (const register of COMMAND_GROUPS) register(program, context);
  return program;
}

/** Runs one command line (`process.argv` shape); a failure is printed as {@link errorLine} and sets exit code 1. */
export async function run(argv: readonly string[]): Promise<void> {
  try {
    await createProgram().parseAsync(argv);
  } catch (err) {
    console.error(errorLine(err));
    process.exitCode = 1;
  }
}

/**
 * The one line printed for a failed command, under describeError's policy: converge's own messages
 * in full (they never carry payloads or passwords), any other error by class and code only, since
 * its message can quote data (a driver's "invalid input syntax … <value>", a handler's text).
 */
export function errorLine(err: unknown): string {
  const described = describeError(err);
  const kept = err instanceof ConvergeError && described.err !== err.name;
  if (kept) return `converge: ${err.code}: ${err.message}`;
  return `converge: ${[described.err, described.code].filter((part) => part !== undefined).join(' ')}`;
}
