import type { Command } from 'commander';
import pg from 'pg';
import { registerConvergenceMetrics, serveMetrics } from '../../metrics/index.js';
import { integer, untilShutdownSignal, type CommandContext } from '../context.js';

/** `metrics`: serves the convergence gauges until SIGTERM/SIGINT. */
export function registerMetrics(program: Command, context: CommandContext): void {
  program
    .command('metrics')
    .description('serve convergence gauges (reorder buffer, gaps) on /metrics for Prometheus until SIGTERM/SIGINT')
    .option('--port <n>', 'port to listen on', integer, 9464)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--gap-after-ms <n>', 'an aggregate counts as a gap after waiting this long', integer, 60_000)
    .action(async (options: { port: number; host: string; gapAfterMs: number }) => {
      const { databaseUrl, schema } = context.globals();
      const pool = new pg.Pool({ connectionString: databaseUrl, max: 2, application_name: 'converge-metrics' });
      pool.on('error', () => undefined);
      const registry = registerConvergenceMetrics({ pool, schema, gapAfterMs: options.gapAfterMs });
      const server = await serveMetrics(registry, { port: options.port, host: options.host });
      console.log(`serving /metrics on ${options.host}:${options.port}`);
      await untilShutdownSignal();
      server.close();
      await pool.end();
    });
}
