import { serveTenantMetrics } from '../../metrics/index.js';
import { ConfigError } from '../../runtime/errors.js';
import type { Logger } from '../../runtime/logger.js';
import { startTenants } from '../../tenants/index.js';
import { untilShutdownSignal, type PoolMode } from '../context.js';
import { amqpUrl } from '../env.js';

/** The `converge relay` flags a tenant run reads (relay.ts's RelayCliOptions fits). */
export interface TenantRelayFlags {
  mode: 'polling' | 'cdc';
  claim: 'lease' | 'exclusive';
  amqpUrl?: string;
  exchange: string;
  routingKey: string;
  batchSize: number;
  leaseMs: number;
  pollMs: number;
  maxAttempts: number;
  relayId?: string;
  directUrl?: string;
  metricsPort?: number;
  metricsHost: string;
  maxConnections: number;
}

/**
 * `relay --schema a,b,c`: a relay per tenant schema in this process, on one broker connection and
 * one pool of --max-connections (docs/tenants.md). What needs a session per relay is refused.
 */
export async function runTenantRelays(
  options: TenantRelayFlags,
  target: { databaseUrl: string; schemas: string[]; poolMode: PoolMode },
  logger: Logger,
): Promise<void> {
  refuseForTenants(options);
  const tenants = startTenants({
    schemas: target.schemas,
    connectionString: target.databaseUrl,
    poolMode: target.poolMode,
    maxConnections: options.maxConnections,
    amqpUrl: amqpUrl(options.amqpUrl),
    exchange: options.exchange,
    relay: {
      routingKey: options.routingKey,
      batchSize: options.batchSize,
      leaseMs: options.leaseMs,
      pollIntervalMs: options.pollMs,
      maxAttempts: options.maxAttempts,
    },
    logger,
  });
  const metrics =
    options.metricsPort === undefined
      ? undefined
      : serveTenantMetrics(tenants, { port: options.metricsPort, host: options.metricsHost });
  const started = { schemas: target.schemas, exchanges: `${options.exchange}.<schema>` };
  logger.info({ ...started, metrics: metrics ? await metrics.url : undefined }, 'tenant relays started');
  const misconfigured = tenants.ready().then(() => new Promise<never>(() => undefined));
  try {
    await Promise.race([untilShutdownSignal(), misconfigured]);
  } finally {
    await tenants.stop();
    await metrics?.close();
  }
  logger.info({ schemas: target.schemas.length }, 'tenant relays stopped');
}

function refuseForTenants(options: TenantRelayFlags): void {
  const refused: [boolean, string, string][] = [
    [options.mode === 'cdc', 'mode', 'several schemas are relayed by polling only'],
    [options.claim === 'exclusive', 'claim', 'claim exclusive holds a session per schema: use lease with several'],
    [options.directUrl !== undefined, 'direct-url', 'several schemas share one LISTEN connection of the pool'],
    [options.relayId !== undefined, 'relay-id', 'several schemas: each relay is named <host:pid>/<schema>'],
  ];
  const problems = refused.filter(([when]) => when).map(([, path, message]) => ({ path, message }));
  if (problems.length > 0) throw new ConfigError(problems);
}
