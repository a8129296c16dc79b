import { Option, type Command } from 'commander';
import { serveRelayMetrics } from '../../metrics/index.js';
import { DEFAULT_CDC_SLOT, startCdcRelay, startRelay, type CdcRelay, type Relay } from '../../relay/index.js';
import type { Logger } from '../../runtime/logger.js';
import { createLogger } from '../../runtime/logger.js';
import { ConfigError } from '../../runtime/errors.js';
import {
  duration,
  port,
  positiveInteger,
  AMQP_URL_HELP,
  untilShutdownSignal,
  type CommandContext,
} from '../context.js';
import { amqpUrl, logLevel, relayFlagDefaults } from '../env.js';
import { TENANT_MAX_CONNECTIONS } from '../../tenants/index.js';
import { runTenantRelays } from './relay-tenants.js';

interface RelayCliOptions {
  mode: 'polling' | 'cdc';
  slot: string;
  publication: string;
  amqpUrl?: string;
  exchange: string;
  routingKey: string;
  batchSize: number;
  claim: 'lease' | 'exclusive';
  leaseMs: number;
  pollMs: number;
  maxAttempts: number;
  relayId?: string;
  metricsPort?: number;
  metricsHost: string;
  directUrl?: string;
  failoverSlot?: boolean;
  maxConnections: number;
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
    .option(
      '--failover-slot',
      'cdc: create the slot with failover = true (PostgreSQL 17+), kept on standbys that sync slots; the database URL may then list the primary and its standbys',
    )
    .option('--amqp-url <url>', AMQP_URL_HELP)
    .option('--exchange <name>', 'topic exchange to publish to', relayFlagDefaults.exchange)
    .option('--routing-key <template>', 'routing key template', relayFlagDefaults.routingKey)
    .option('--batch-size <n>', 'rows claimed per cycle', positiveInteger, relayFlagDefaults.batchSize)
    .addOption(
      new Option(
        '--claim <how>',
        'polling: lease (relays share the outbox) or exclusive (one relay per schema publishes, others stand by)',
      )
        .choices(['lease', 'exclusive'])
        .default(relayFlagDefaults.claim),
    )
    .option('--lease-ms <n>', 'claim lease in ms (claim lease)', duration, relayFlagDefaults.leaseMs)
    .option('--poll-ms <n>', 'idle poll interval in ms', duration, relayFlagDefaults.pollIntervalMs)
    .option(
      '--max-attempts <n>',
      'attempts before an event is marked failed',
      positiveInteger,
      relayFlagDefaults.maxAttempts,
    )
    .option('--relay-id <id>', 'identity recorded in claimed_by')
    .addOption(
      new Option(
        '--direct-url <url>',
        "polling: PostgreSQL itself, for LISTEN and the exclusive claim's lock when DATABASE_URL goes through a transaction-mode pooler",
      ).env('DIRECT_DATABASE_URL'),
    )
    .addOption(
      new Option('--metrics-port <n>', 'serve /metrics, /healthz and /readyz on this port')
        .env('CONVERGE_METRICS_PORT')
        .argParser(port),
    )
    .option('--metrics-host <host>', 'address the metrics endpoint binds', '127.0.0.1')
    .option(
      '--max-connections <n>',
      'with several schemas (--schema a,b,c): PostgreSQL connections for all their relays together',
      positiveInteger,
      TENANT_MAX_CONNECTIONS,
    )
    .action(async (options: RelayCliOptions) => {
      const { databaseUrl, schema, schemas, poolMode } = context.globals({ several: true });
      const logger = createLogger('converge-relay', logLevel());
      if (schemas.length > 1) return runTenantRelays(options, { databaseUrl, schemas, poolMode }, logger);
      if (options.mode === 'cdc' && poolMode === 'transaction')
        throw new ConfigError(
          'pool-mode',
          'the CDC relay streams from a replication slot, which a transaction-mode pooler cannot carry: give it a --database-url of PostgreSQL itself',
        );
      if (options.mode === 'cdc') return runCdcRelay(options, { databaseUrl, schema }, logger);
      const relay = startRelay({
        connectionString: databaseUrl,
        poolMode,
        ...(options.directUrl ? { directConnectionString: options.directUrl } : {}),
        amqpUrl: amqpUrl(options.amqpUrl),
        schema,
        exchange: options.exchange,
        routingKey: options.routingKey,
        batchSize: options.batchSize,
        claim: options.claim,
        leaseMs: options.leaseMs,
        pollIntervalMs: options.pollMs,
        maxAttempts: options.maxAttempts,
        ...(options.relayId ? { relayId: options.relayId } : {}),
        logger,
      });
      const started = { relayId: relay.options.relayId, schema, exchange: options.exchange };
      await runUntilShutdown(relay, { options, logger, name: 'relay', started });
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
    ...(options.failoverSlot ? { failoverSlot: true } : {}),
    ...(options.relayId ? { relayId: options.relayId } : {}),
    logger,
  });
  const started = { relayId: relay.options.relayId, schema: target.schema, slot: options.slot };
  await runUntilShutdown(relay, { options, logger, name: 'CDC relay', started });
}

/**
 * Serves the relay's metrics when --metrics-port is given, logs `<name> started` with `started`,
 * and runs until SIGTERM/SIGINT. A permanent misconfiguration (wrong password, missing database,
 * unmigrated schema) rejects ready() and stops the relay: the command then fails with that message
 * instead of retrying.
 */
async function runUntilShutdown(
  relay: Relay | CdcRelay,
  run: { options: RelayCliOptions; logger: Logger; name: string; started: Record<string, unknown> },
): Promise<void> {
  const { options, logger, name } = run;
  const metrics =
    options.metricsPort === undefined
      ? undefined
      : serveRelayMetrics(relay, { port: options.metricsPort, host: options.metricsHost });
  logger.info({ ...run.started, metrics: metrics ? await metrics.url : undefined }, `${name} started`);
  const misconfigured = relay.ready().then(() => new Promise<never>(() => undefined));
  try {
    await Promise.race([untilShutdownSignal(), misconfigured]);
  } finally {
    await relay.stop();
    await metrics?.close();
  }
  logger.info({ relayId: relay.options.relayId }, `${name} stopped`);
}
