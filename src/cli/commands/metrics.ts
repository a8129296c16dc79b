import type { Command } from 'commander';
import type { AddressInfo } from 'node:net';
import {
  convergenceMetricsOptions,
  registerConvergenceMetrics,
  serveMetrics,
  serveMetricsOptions,
} from '../../metrics/index.js';
import { pingDatabase } from '../../db/pool.js';
import { duration, openPool, port, untilShutdownSignal, type CommandContext } from '../context.js';
import { schemaDefault } from '../env.js';

/** `metrics`: serves the convergence gauges until SIGTERM/SIGINT. */
export function registerMetrics(program: Command, context: CommandContext): void {
  program
    .command('metrics')
    .description('serve convergence gauges (reorder buffer, gaps) on /metrics for Prometheus until SIGTERM/SIGINT')
    // CLI-only: the library has no default port (serveMetrics needs one given, 0 = any free).
    .option('--port <n>', 'port to listen on', port, 9464)
    .option('--host <host>', 'address to bind', schemaDefault<string>(serveMetricsOptions, 'host'))
    .option(
      '--gap-after-ms <n>',
      'an aggregate counts as a gap after waiting this long',
      duration,
      schemaDefault<number>(convergenceMetricsOptions, 'gapAfterMs'),
    )
    .action(async (options: { port: number; host: string; gapAfterMs: number }) => {
      const { databaseUrl, schema, poolMode } = context.globals();
      const pool = openPool(databaseUrl, 2, 'converge-metrics', poolMode);
      const registry = registerConvergenceMetrics(pool, { schema, gapAfterMs: options.gapAfterMs });
      const server = await serveMetrics(registry, {
        port: options.port,
        host: options.host,
        ready: () => pingDatabase(pool),
      }).catch(async (err: unknown) => {
        await pool.end();
        throw err;
      });
      // With --port 0 the system picks the port: print the one actually bound.
      console.log(`serving /metrics on ${options.host}:${(server.address() as AddressInfo).port}`);
      await untilShutdownSignal();
      server.close();
      await pool.end();
    });
}
