import type { Command } from 'commander';
import { dashboardOptions, startDashboard } from '../../dashboard/index.js';
import type { WatchedQueue } from '../../ops/index.js';
import { databaseFailure, poolTarget } from '../../db/pool.js';
import { createLogger } from '../../runtime/logger.js';
import { checkSchema } from '../../schema/migrate.js';
import { AMQP_URL_HELP, duration, openPool, port, untilShutdownSignal, type CommandContext } from '../context.js';
import { amqpUrl, dashboardToken, logLevel, schemaDefault } from '../env.js';
import { queueOption, stallAfterOption } from './status.js';

interface DashboardCliOptions {
  host: string;
  port: number;
  token?: string;
  queue: WatchedQueue[];
  amqpUrl?: string;
  interval: number;
  history: number;
  stallAfterMs: number;
}

const dashboardDefault = <T>(key: string) => schemaDefault<T>(dashboardOptions, key);

/** `dashboard`: the web page over status, diagnosis and the quarantine, until SIGTERM/SIGINT. */
export function registerDashboard(program: Command, context: CommandContext): void {
  program
    .command('dashboard')
    .description(
      'serve a web page with the pipeline status, stall findings, backlog and lag charts and the quarantine (show, replay, discard) until SIGTERM/SIGINT',
    )
    .option('--host <host>', 'address to bind (keep it on loopback; see docs/dashboard.md)', dashboardDefault('host'))
    // CLI-only: the library has no default port (startDashboard needs one given, 0 = any free).
    .option('--port <n>', 'port to listen on', port, 7780)
    .option(
      '--token <secret>',
      'the secret actions need, at least 16 characters (default: env CONVERGE_DASHBOARD_TOKEN, else a random one)',
    )
    .addOption(
      queueOption('a queue to watch and replay to: name[,consumer=inbox scope][,projection=name] (repeatable)'),
    )
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option('--interval <ms>', 'sample the pipeline this often', duration, dashboardDefault('sampleIntervalMs'))
    .option('--history <ms>', 'charts reach this far back', duration, dashboardDefault('historyMs'))
    .addOption(stallAfterOption(dashboardDefault('stallAfterMs')))
    .action(async (options: DashboardCliOptions) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const pool = openPool(databaseUrl, 4, 'converge-dashboard', poolMode);
      const token = dashboardToken(options.token);
      // An unmigrated schema says "run converge migrate" here, not as a sampling error on the page.
      const dashboard = await checkSchema(pool, schema)
        .then(() =>
          startDashboard({
            pool,
            schema,
            amqpUrl: amqpUrl(options.amqpUrl),
            queues: options.queue,
            host: options.host,
            port: options.port,
            ...(token !== undefined ? { token } : {}),
            sampleIntervalMs: options.interval,
            historyMs: options.history,
            stallAfterMs: options.stallAfterMs,
            logger: createLogger('converge-dashboard', logLevel()),
          }),
        )
        .catch(async (err: unknown) => {
          await pool.end();
          throw databaseFailure(err, poolTarget(pool));
        });
      // The token is in the fragment: the browser keeps it out of requests, so it never reaches a log.
      console.log(`dashboard on ${dashboard.url}`);
      await untilShutdownSignal();
      await dashboard.close();
      await pool.end();
    });
}
