/**
 * One relay or consumer of the chaos run, in its own process so that the injector can
 * `kill -9` it. Configured by the CHAOS_WORKER environment variable (JSON). Failpoints, when
 * armed, kill the process at the two most dangerous moments: after the broker confirmed a
 * batch and before it is marked published (relay), and after the consumer committed and
 * before it acked (consumer).
 */
import { pino } from 'pino';
import {
  applyIncrement,
  applySnapshot,
  silentLogger,
  startConsumer,
  startCdcRelay,
  startRelay,
  type EventEnvelope,
  type HandlerContext,
} from '../src/index.js';
import { newPool } from '../src/db/pool.js';
import { withApplicationName } from './pooler-faults.js';

export interface WorkerConfig {
  role: 'relay' | 'consumer';
  name: string;
  schema: string;
  exchange: string;
  queue: string;
  databaseUrl: string;
  /** transaction: databaseUrl is a transaction-mode PgBouncer (--pg pooler), and converge is told so. */
  poolMode: 'session' | 'transaction';
  /** PostgreSQL itself beside the pooler, for what needs a session: an exclusive relay's lock and its LISTEN. */
  directUrl?: string;
  /** One broker URL, or a cluster's node URLs to fail over between. */
  amqpUrl: string | string[];
  /** application_name of the worker's connections, so the injector can terminate exactly them. */
  appName: string;
  /** Die at the next failpoint. */
  armed: boolean;
  /** Handler delay per event, to build a backlog. */
  slowMs: number;
  /** As the run declared the queues; the consumer declares them again (the same arguments) and, for quorum, consumes `<queue>.dead`. */
  queueType: 'classic' | 'quorum';
  /** polling relays (claim lease), polling relays with claim exclusive, or CDC relays sharing `slot` and `publication`. */
  relayMode: 'polling' | 'exclusive' | 'cdc';
  slot: string;
  publication: string;
  /**
   * --pg failover: databaseUrl is the pair's host list, and a CDC relay's slot is a failover slot,
   * so the relay is given the list itself (its replication stream follows the writable host).
   */
  failover: boolean;
  /** Where the library's log goes (--worker-logs); none: silent. */
  logFile?: string;
}

const config = JSON.parse(process.env.CHAOS_WORKER ?? '{}') as WorkerConfig;
const die = () => process.kill(process.pid, 'SIGKILL');
// Synchronous writes: a worker killed with -9 keeps every line it logged before.
const logger = config.logFile
  ? pino({ level: 'debug' }, pino.destination({ dest: config.logFile, sync: true, append: true }))
  : silentLogger;
// newPool, not pg.Pool: with --pg failover databaseUrl is a host list, which only converge's pool reads.
const pool = newPool({ connectionString: config.databaseUrl, application_name: config.appName, max: 6 });
// A terminated backend surfaces here for idle clients; the components retry on their own.
pool.on('error', () => undefined);

const stop = config.role === 'relay' ? runRelay() : runConsumer();
// The run died without cleaning up (a crash, kill -9): an orphaned worker would keep consuming forever.
process.once('disconnect', () => process.exit(1));
// A run that ended while this worker was still loading disconnected before the listener above existed.
if (!process.connected) process.exit(1);
process.once('SIGTERM', () => {
  void stop()
    .then(() => pool.end())
    .then(() => process.exit(0));
});

function runRelay(): () => Promise<void> {
  if (config.relayMode === 'cdc') return runCdcRelay();
  const relay = startRelay({
    amqpUrl: config.amqpUrl,
    pool,
    schema: config.schema,
    exchange: config.exchange,
    relayId: config.name,
    // Through the pooler a lease relay polls (no session to LISTEN on); an exclusive one keeps its lock on directUrl.
    poolMode: config.poolMode,
    ...(config.directUrl ? { directConnectionString: withApplicationName(config.directUrl, config.appName) } : {}),
    // exclusive: one holds the schema's relay lock, the other waits. leaseMs is then the lock session's
    // idle limit, which must outlast a confirm wait (the options refuse less).
    claim: config.relayMode === 'exclusive' ? 'exclusive' : 'lease',
    standbyRetryMs: 200,
    pollIntervalMs: 50,
    leaseMs: config.relayMode === 'exclusive' ? 6_000 : 2_000,
    confirmTimeoutMs: 5_000,
    backoff: { initialDelayMs: 50, maxDelayMs: 1_000 },
    reconnectBackoff: { initialDelayMs: 100, maxDelayMs: 1_000 },
    maxAttempts: 1_000_000,
    logger,
    hooks: {
      afterConfirm: () => {
        if (config.armed) die();
      },
    },
  });
  process.send?.({ ready: true });
  return () => relay.stop();
}

/** The failpoint sits after the broker confirmed and before the rows are marked and the slot acknowledged. */
function runCdcRelay(): () => Promise<void> {
  const relay = startCdcRelay({
    amqpUrl: config.amqpUrl,
    pool,
    schema: config.schema,
    exchange: config.exchange,
    relayId: config.name,
    slot: config.slot,
    publication: config.publication,
    createSlot: false,
    // The pool follows the writable host already; the replication stream needs the list itself.
    ...(config.failover ? { connectionString: config.databaseUrl, failoverSlot: true } : {}),
    confirmTimeoutMs: 5_000,
    standbyRetryMs: 200,
    backoff: { initialDelayMs: 50, maxDelayMs: 1_000 },
    reconnectBackoff: { initialDelayMs: 100, maxDelayMs: 1_000 },
    logger,
    hooks: {
      beforeAcknowledge: (eventIds) => {
        if (config.armed && eventIds.length > 0) die();
      },
    },
  });
  process.send?.({ ready: true });
  return () => relay.stop();
}

function runConsumer(): () => Promise<void> {
  const q = `"${config.schema}"`;
  const target = (event: EventEnvelope) => ({ projection: 'chaos', event, schema: config.schema });
  const effect = (tx: HandlerContext['tx'], event: EventEnvelope) =>
    tx.query(`INSERT INTO ${q}.chaos_effects (event_id, aggregate_id, version, kind) VALUES ($1, $2, $3, $4)`, [
      event.eventId,
      event.aggregateId,
      event.aggregateVersion,
      event.kind,
    ]);
  const slow = () => (config.slowMs > 0 ? new Promise((resolve) => setTimeout(resolve, config.slowMs)) : undefined);
  const consumer = startConsumer({
    amqpUrl: config.amqpUrl,
    queue: config.queue,
    consumer: 'chaos',
    exchange: config.exchange,
    pool,
    poolMode: config.poolMode,
    schema: config.schema,
    queueType: config.queueType,
    prefetch: 200,
    batchSize: 50,
    backoff: { initialDelayMs: 50, maxDelayMs: 1_000 },
    reconnectBackoff: { initialDelayMs: 100, maxDelayMs: 1_000 },
    logger,
    hooks: {
      afterCommit: () => {
        if (config.armed) die();
      },
    },
    handlers: {
      AmountAdded: async (event, { tx }) => {
        await slow();
        await applyIncrement(tx, target(event), async () => {
          // The rows exist from the start (chaos/run.ts seeds one per aggregate), so an UPDATE is enough here.
          const written = await tx.query(`UPDATE ${q}.chaos_projection SET total = total + $2 WHERE id = $1`, [
            event.aggregateId,
            (event.payload as { delta: number }).delta,
          ]);
          await effect(tx, event);
          return written;
        });
      },
      TotalSnapshot: async (event, { tx }) => {
        await slow();
        await applySnapshot(tx, target(event), async () => {
          const written = await tx.query(`UPDATE ${q}.chaos_projection SET total = $2 WHERE id = $1`, [
            event.aggregateId,
            (event.payload as { total: number }).total,
          ]);
          await effect(tx, event);
          return written;
        });
      },
    },
  });
  void consumer.ready().then(() => process.send?.({ ready: true }));
  return () => consumer.stop();
}
