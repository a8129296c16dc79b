import { Option, type Command } from 'commander';
import { serveCdcRelayMetrics, serveRelayMetrics } from '../../metrics/index.js';
import { startRelay } from '../../relay/index.js';
import { DEFAULT_CDC_SLOT, startCdcRelay } from '../../cdc/index.js';
import type { Logger } from '../../runtime/logger.js';
import { createLogger } from '../../runtime/logger.js';
import {
  duration,
  port,
  positiveInteger,
  AMQP_URL_HELP,
  untilShutdownSignal,
  type CommandContext,
} from '../context.js';
import { amqpUrl, logLevel, relayFlagDefaults } from '../env.js';

interface RelayCliOptions {
  mode: 'polling' | 'cdc';
  slot: string;
  publication: string;
  amqpUrl?: string;
  exchange: string;
  routingKey: string;
  batchSize: number;
  leaseMs: number;
  pollMs: number;
  maxAttempts: number;
  relayId?: string;
  metricsPort?: number;
  metricsHost: string;
}

/** `relay`: runs a relay (and optionally its metrics endpoint) until SIGTERM/SIGINT; flag defaults are the relay's own. */
export function registerRelay(program: Command, context: CommandContext): void {
  program
    .command('relay')
    .description('publish committed outbox events to RabbitMQ until SIGTERM/SIGINT')
    .addOption(
      new Option(
        '--mode <mode>',
        'polling: claim rows from the outbox; cdc: read committed inserts from a replication slot',
      )
        .choices(['polling', 'cdc'])
        .default('polling'),
    )
    .option(
      '--slot <name>',
      'cdc: replication slot to read (created with its publication when missing)',
      DEFAULT_CDC_SLOT,
    )
    .option('--publication <name>', "cdc: publication of the outbox's inserts", DEFAULT_CDC_SLOT)
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option('--exchange <name>', 'topic exchange to publish to', relayFlagDefaults.exchange)
    .option('--routing-key <template>', 'routing key template', relayFlagDefaults.routingKey)
    .option('--batch-size <n>', 'rows claimed per cycle', positiveInteger, relayFlagDefaults.batchSize)
    .option('--lease-ms <n>', 'claim lease in ms', duration, relayFlagDefaults.leaseMs)
    .option('--poll-ms <n>', 'idle poll interval in ms', duration, relayFlagDefaults.pollIntervalMs)
    .option(
      '--max-attempts <n>',
      'attempts before an event is marked failed',
      positiveInteger,
      relayFlagDefaults.maxAttempts,
    )
    .option('--relay-id <id>', 'identity recorded in claimed_by')
    .addOption(
      new Option('--metrics-port <n>', 'serve /metrics, /healthz and /readyz on this port')
        .env('CONVERGE_METRICS_PORT')
        .argParser(port),
    )
    .option('--metrics-host <host>', 'address the metrics endpoint binds', '127.0.0.1')
    .action(async (options: RelayCliOptions) => {
      const { databaseUrl, schema } = context.globals();
      const logger = createLogger('converge-relay', logLevel());
      if (options.mode === 'cdc') return runCdcRelay(options, { databaseUrl, schema }, logger);
      const relay = startRelay({
        connectionString: databaseUrl,
        amqpUrl: amqpUrl(options.amqpUrl),
        schema,
        exchange: options.exchange,
        routingKey: options.routingKey,
        batchSize: options.batchSize,
        leaseMs: options.leaseMs,
        pollIntervalMs: options.pollMs,
        maxAttempts: options.maxAttempts,
        ...(options.relayId ? { relayId: options.relayId } : {}),
        logger,
      });
      const metrics =
        options.metricsPort === undefined
          ? undefined
          : serveRelayMetrics(relay, { port: options.metricsPort, host: options.metricsHost });
      const started = { relayId: relay.options.relayId, schema, exchange: options.exchange };
      logger.info({ ...started, metrics: metrics ? await metrics.url : undefined }, 'relay started');
      // A permanent misconfiguration (wrong password, missing database, unmigrated schema) rejects
      // ready() and stops the relay: the command then fails with that message instead of retrying.
      const misconfigured = relay.ready().then(() => new Promise<never>(() => undefined));
      try {
        await Promise.race([untilShutdownSignal(), misconfigured]);
      } finally {
        await relay.stop();
        await metrics?.close();
      }
      logger.info({ relayId: relay.options.relayId }, 'relay stopped');
    });
}

/** `relay --mode cdc`: the batch, lease, poll and attempt flags do not apply (the slot orders and hands out rows). */
async function runCdcRelay(
  options: RelayCliOptions,
  target: { databaseUrl: string; schema: string },
  logger: Logger,
): Promise<void> {
  const relay = startCdcRelay({
    connectionString: target.databaseUrl,
    amqpUrl: amqpUrl(options.amqpUrl),
    schema: target.schema,
    exchange: options.exchange,
    routingKey: options.routingKey,
    slot: options.slot,
    publication: options.publication,
    ...(options.relayId ? { relayId: options.relayId } : {}),
    logger,
  });
  const metrics =
    options.metricsPort === undefined
      ? undefined
      : serveCdcRelayMetrics(relay, { port: options.metricsPort, host: options.metricsHost });
  const started = { relayId: relay.options.relayId, schema: target.schema, slot: options.slot };
  logger.info({ ...started, metrics: metrics ? await metrics.url : undefined }, 'CDC relay started');
  // As the polling relay: a permanent misconfiguration ends the command with its message.
  const misconfigured = relay.ready().then(() => new Promise<never>(() => undefined));
  try {
    await Promise.race([untilShutdownSignal(), misconfigured]);
  } finally {
    await relay.stop();
    await metrics?.close();
  }
  logger.info({ relayId: relay.options.relayId }, 'CDC relay stopped');
}
