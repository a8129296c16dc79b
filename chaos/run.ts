/**
 * npm run chaos: the full pipeline (producers → outbox → two relays → RabbitMQ → two
 * consumers → projection) under a seeded schedule of faults, then a check from the databases
 * that nothing was lost, nothing applied twice, every aggregate equals its source and nothing
 * is stuck. The last line is `faults=N events=N lost=0 double_applied=0 mismatched=0 stuck=0`;
 * the exit code is 1 on any defect. The same --seed replays the same faults in the same order.
 * `--pg pooler` puts a PgBouncer in transaction mode between the workers and PostgreSQL
 * (chaos/pooler-faults.ts); the producers, the injector and the check always connect directly.
 * `--pg failover` runs everything on a synchronous primary/standby pair of the run's own through its
 * host list, and crashes the primary and promotes the standby once (chaos/failover-faults.ts).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { appendToOutbox, migrate, reconcile, withTransaction, type ReconcileRow } from '../src/index.js';
import {
  encodeMessage,
  outboxRowToEnvelope,
  routingKeyFromTemplate,
  DEFAULT_ROUTING_KEY,
  type OutboxEnvelopeRow,
} from '../src/internal/index.js';
import {
  DEFAULT_DELIVERY_LIMIT,
  DEFAULT_RETRY_TIERS_MS,
  deadQueueName,
  queueSetArguments,
  retryTiers,
} from '../src/transport/queue-arguments.js';
import { between, everyKindRan, faultBag, FAULT_KINDS, seededRandom, type FaultKind } from './schedule.js';
import { ClusterFaults, faultKindsFor, isClusterFault, rotated } from './cluster-faults.js';
import type { WorkerConfig } from './worker.js';
import {
  AMQP_URL,
  CDC_DATABASE_URL,
  DATABASE_URL,
  connectRabbit,
  dropBrokerNames,
  uniqueName,
} from '../kit/services.js';
import { createCdcSlot, dropCdcSlot } from '../src/relay/index.js';
import { rabbitmqctl as brokerctl } from '../kit/broker-admin.js';
import { drawableIn, pgMode, PgFaults } from './pg-faults.js';
import { PoolerFaults, workerConnection } from './pooler-faults.js';
import { FailoverFaults } from './failover-faults.js';
import { newPool } from '../src/db/pool.js';
import { countedCommit } from './commit-outcome.js';

const { values: flags } = parseArgs({
  options: {
    duration: { type: 'string', default: '180' },
    seed: { type: 'string' },
    orders: { type: 'string', default: '200' },
    rate: { type: 'string', default: '150' },
    'quiesce-timeout': { type: 'string', default: '180' },
    'no-broker-restart': { type: 'boolean', default: false },
    faults: { type: 'string' },
    quorum: { type: 'boolean', default: false },
    // A 3-node RabbitMQ cluster of spare nodes instead of the shared broker, with node faults (implies --quorum).
    cluster: { type: 'boolean', default: false },
    // shared: the usual server (never restarted); embedded: one of the run's own, with PG restart faults;
    // pooler: relays and consumers through a PgBouncer of the run's own (transaction mode), with its restarts.
    // failover: everything on a synchronous primary/standby pair's host list, with one failover (pg-failover).
    pg: { type: 'string' },
    // Goes on past --duration until each chosen fault kind ran once (a short CI pass on a slow machine).
    'every-kind': { type: 'boolean', default: false },
    // polling: the usual relays (claim lease, both publish); exclusive: the same two with claim
    // exclusive (one holds the schema's relay lock, the other waits as standby); cdc: CDC relays
    // (one active, one standby) on CDC_DATABASE_URL.
    relay: { type: 'string', default: 'polling' },
    // Each worker writes its library log (debug and up, JSON lines) to DIR/<worker>.log: for chasing a failure.
    'worker-logs': { type: 'string' },
    // Test only: corrupts the result after quiescence, to prove the check sees each kind of defect.
    sabotage: { type: 'boolean', default: false },
  },
});
const durationMs = Number(flags.duration) * 1000;
const seed = flags.seed === undefined ? randomBytes(4).readUInt32BE() : Number(flags.seed);
const orders = Number(flags.orders);
const ratePerSecond = Number(flags.rate);
const quiesceMs = Number(flags['quiesce-timeout']) * 1000;
const chosenKinds = flags.faults ? (flags.faults.split(',') as FaultKind[]) : undefined;
const relayMode = relayModeOf(flags.relay);
/** One relay publishes, the other waits to take over: the faults aimed at "the relay" aim at the active one. */
const activeStandby = relayMode !== 'polling';
const RELAY_HEADER: Record<typeof relayMode, string> = {
  polling: 'polling (claim lease, both publish)',
  exclusive: 'exclusive (polling, claim exclusive: one active, one standby)',
  cdc: 'cdc (one active, one standby)',
};
const postgresMode = pgMode(flags.pg, chosenKinds, relayMode);
const log = (message: string) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
const random = seededRandom(seed);
const quorum = flags.quorum || flags.cluster;
const queueType = quorum ? 'quorum' : 'classic';
// Checked before any server starts: a refused flag must not leave an embedded PostgreSQL or a PgBouncer behind.
const kinds = faultKindsFor(
  flags.cluster,
  chosenKinds ??
    FAULT_KINDS.filter((k) => !(flags['no-broker-restart'] && k === 'restart-broker') && drawableIn(postgresMode, k)),
);
for (const kind of kinds)
  if (!FAULT_KINDS.includes(kind)) throw new Error(`unknown fault ${kind}; known: ${FAULT_KINDS.join(', ')}`);
const pgFaults = await PgFaults.start(postgresMode);
const failoverFaults = await FailoverFaults.start(postgresMode, log);
/**
 * The producers', the injector's and the check's database: never through the pooler the run judges.
 * With --pg failover the pair's host list (wal_level=logical, so CDC relays stream from it too).
 */
const databaseUrl =
  failoverFaults.url ?? (relayMode === 'cdc' ? CDC_DATABASE_URL : (pgFaults.server?.url ?? DATABASE_URL));
const poolerFaults = await PoolerFaults.start(postgresMode, databaseUrl, log);
/** The workers': the same database, or (--pg pooler) the run's PgBouncer in front of it. */
const workerDatabase = workerConnection(postgresMode, relayMode, { direct: databaseUrl, pooler: poolerFaults.url });
const amqpUrl = AMQP_URL;
const schema = uniqueName('chaos');
const runId = schema.slice('chaos_'.length);
const q = `"${schema}"`;
const exchange = `chaos.${runId}`;
/** --relay cdc: the slot and publication both relays share (one streams, the other waits as standby). */
const cdcSlot = { slot: `chaos_${runId}`, publication: `chaos_${runId}` };
const queue = `chaos.${runId}.projection`;
const nextFault = faultBag(random, kinds);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let clusterFaults: ClusterFaults | undefined;
/** The injector's own broker connection: the shared broker, or any running node of the cluster. */
const connectBroker = () => (clusterFaults ? clusterFaults.connect() : amqp.connect(amqpUrl));

// newPool reads the failover pair's host list (pg.Pool alone cannot): each new connection goes to the writable server.
const pool = newPool({ connectionString: databaseUrl, max: 8, application_name: `chaos-${runId}-injector` });
pool.on('error', () => undefined);

function relayModeOf(flag: string): WorkerConfig['relayMode'] {
  const modes: WorkerConfig['relayMode'][] = ['polling', 'exclusive', 'cdc'];
  const mode = modes.find((m) => m === flag);
  if (!mode) throw new Error(`--relay must be polling, exclusive or cdc, not ${flag}`);
  return mode;
}

// ---- workers ----

interface Worker {
  config: WorkerConfig;
  child: ChildProcess | undefined;
}

const workerFile = fileURLToPath(new URL('./worker.ts', import.meta.url));
const workers: Worker[] = [
  ...['relay-a', 'relay-b'].map((name) => worker('relay', name)),
  ...['consumer-a', 'consumer-b'].map((name) => worker('consumer', name)),
];

function worker(role: WorkerConfig['role'], name: string): Worker {
  return {
    config: {
      role,
      name: `chaos-${runId}-${name}`,
      schema,
      exchange,
      queue,
      ...workerDatabase,
      amqpUrl,
      appName: `chaos-${runId}-${name}`,
      armed: false,
      slowMs: 0,
      queueType,
      relayMode,
      ...cdcSlot,
      failover: postgresMode === 'failover',
      logFile: flags['worker-logs'] ? path.join(flags['worker-logs'], `${name}.log`) : undefined,
    },
    child: undefined,
  };
}

function spawn(w: Worker, overrides: Partial<WorkerConfig> = {}): Promise<void> {
  const config = { ...w.config, ...overrides };
  const child = fork(workerFile, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, CHAOS_WORKER: JSON.stringify(config) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  w.child = child;
  child.once('exit', () => {
    if (w.child === child) w.child = undefined;
  });
  return new Promise((resolve) => {
    child.once('message', () => resolve());
    child.once('exit', () => resolve());
  });
}

async function kill(w: Worker): Promise<void> {
  const child = w.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

async function stopGracefully(w: Worker): Promise<void> {
  const child = w.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(15_000).then(() => child.kill('SIGKILL'))]);
  await exited;
}

/** Keeps every worker alive: whatever died (killed or at a failpoint) comes back, unarmed. */
async function revive(): Promise<void> {
  await Promise.all(workers.filter((w) => !w.child).map((w) => spawn(w)));
}

/** The same, without waiting for the workers to be up: the next fault may hit them while they start. */
function reviveInBackground(): void {
  for (const w of workers.filter((w) => !w.child)) void spawn(w);
}

// ---- setup and producers ----

async function setup(): Promise<void> {
  await migrate(pool, { schema });
  await pool.query(
    `CREATE TABLE ${q}.chaos_source (id text PRIMARY KEY, version bigint NOT NULL DEFAULT 0, total bigint NOT NULL DEFAULT 0)`,
  );
  await pool.query(`CREATE TABLE ${q}.chaos_projection (id text PRIMARY KEY, total bigint NOT NULL DEFAULT 0)`);
  // No unique key on purpose: an effect written twice must be countable, not an error.
  await pool.query(
    `CREATE TABLE ${q}.chaos_effects (event_id text NOT NULL, aggregate_id text NOT NULL, version bigint NOT NULL, kind text NOT NULL)`,
  );
  await pool.query(`CREATE INDEX ON ${q}.chaos_effects (event_id)`);
  await pool.query(`INSERT INTO ${q}.chaos_source (id) SELECT 'o' || i FROM generate_series(1, $1::int) i`, [orders]);
  await pool.query(`INSERT INTO ${q}.chaos_projection (id) SELECT id FROM ${q}.chaos_source`);
  // Before the first event: a slot streams only what commits after it exists.
  // On the pair, a failover slot: the standby keeps a copy, from which the relays resume after the promotion.
  if (relayMode === 'cdc') await createCdcSlot(pool, { schema, ...cdcSlot, failover: postgresMode === 'failover' });
  const connection = await connectBroker();
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  // Declared as the consumers declare them (they do it again at start): a quorum queue replicates
  // and survives a node's loss, and with it come the explicit delivery limit, the quorum retry
  // queue and the dead queue whose messages the consumers quarantine.
  const tiers = retryTiers(queue, DEFAULT_RETRY_TIERS_MS);
  const args = queueSetArguments(queue, { queueType, deliveryLimit: DEFAULT_DELIVERY_LIMIT, retryTiers: tiers });
  if (args.dead) await channel.assertQueue(deadQueueName(queue), { durable: true, arguments: args.dead });
  await channel.assertQueue(queue, { durable: true, arguments: args.main });
  await channel.assertQueue(`${queue}.retry`, { durable: true, arguments: args.retry });
  for (const [i, tier] of tiers.entries())
    await channel.assertQueue(tier.queue, { durable: true, arguments: args.tiers[i] });
  await channel.bindQueue(queue, exchange, '#');
  await connection.close();
}

let producing = true;
/**
 * Event ids whose transaction is known committed: its COMMIT returned, or it failed and the writable
 * server (the new primary, after a failover) has the event. The check counts each one missing from
 * the outbox as lost: what the database alone holds cannot show a committed transaction that vanished.
 */
const produced = new Set<string>();
/** Transactions whose COMMIT failed, by what the writable server then said (chaos/commit-outcome.ts). */
const commitInDoubt = { there: 0, absent: 0, unknown: 0 };
/** How long a producer asks about a failed COMMIT: a failover leaves no writable server for a few seconds. */
const IN_DOUBT_MS = 60_000;

/**
 * One business change and its event in one transaction; every tenth change of an order is a
 * snapshot. The source row and its event commit together or not at all, so the check (which reads
 * both from the database) stays exact whatever a failed COMMIT did; `produced` gets the event only
 * when it is known to be committed. With the host list the question after a failed COMMIT goes to
 * the server that accepts writes now: after a failover the promoted standby, which has every
 * transaction whose COMMIT the old primary could have confirmed.
 */
async function change(id: string, delta: number): Promise<void> {
  const counted = await countedCommit(
    (written) =>
      withTransaction(pool, async (client) => {
        const { rows, rowCount } = await client.query<{ version: string; total: string }>(
          `UPDATE ${q}.chaos_source SET version = version + 1, total = total + $2 WHERE id = $1 RETURNING version, total`,
          [id, delta],
        );
        if (rowCount !== 1) throw new Error(`expected one source row for ${id}`);
        const version = Number(rows[0]!.version);
        const snapshot = version % 10 === 0;
        const appended = await appendToOutbox(
          client,
          {
            aggregateType: 'order',
            aggregateId: id,
            aggregateVersion: version,
            eventType: snapshot ? 'TotalSnapshot' : 'AmountAdded',
            kind: snapshot ? 'snapshot' : 'incremental',
            payload: snapshot ? { total: Number(rows[0]!.total) } : { delta },
          },
          { schema },
        );
        written(appended.eventId);
      }),
    {
      present: async (eventId) =>
        ((await pool.query(`SELECT 1 FROM ${q}.outbox WHERE event_id = $1`, [eventId])).rowCount ?? 0) > 0,
      timeoutMs: IN_DOUBT_MS,
      retryMs: 200,
    },
  );
  if (counted.eventId !== undefined) produced.add(counted.eventId);
  if (counted.outcome === 'in-doubt-there') commitInDoubt.there++;
  if (counted.outcome === 'in-doubt-absent') commitInDoubt.absent++;
  if (counted.outcome === 'in-doubt-unknown') commitInDoubt.unknown++;
}

async function produce(): Promise<void> {
  // Producers draw from their own stream: the fault schedule must not depend on timing.
  const draw = seededRandom(seed ^ 0x5eed);
  const lanes = 4;
  const pause = (1000 * lanes) / ratePerSecond;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (producing) {
        try {
          // o1 is the hot aggregate: a tenth of all changes, and the one whose rows get locked.
          await change(draw() < 0.1 ? 'o1' : `o${between(draw, 1, orders)}`, between(draw, 1, 9));
        } catch {
          // change() settles its own failures; anything else (a bug) must not stop the producers mid-run.
        }
        await sleep(pause);
      }
    }),
  );
}

// ---- faults ----

const injectedBad: string[] = [];
let failpointDeaths = 0;
let brokerRestartedAt = 0;
const relays = () => workers.filter((w) => w.config.role === 'relay');
const consumers = () => workers.filter((w) => w.config.role === 'consumer');

async function inject(kind: FaultKind): Promise<void> {
  switch (kind) {
    case 'kill-relay':
    case 'kill-consumer': {
      const group = kind === 'kill-relay' ? relays() : consumers();
      const drawn = group[between(random, 0, group.length - 1)]!;
      // Killing an exclusive standby tests nothing: the lock holder goes, so the standby must take over.
      const exclusiveRelay = kind === 'kill-relay' && relayMode === 'exclusive';
      const holder: Worker | undefined = exclusiveRelay
        ? await activeRelay().catch((err: unknown) => {
            log(`kill-relay: holder unknown (${(err as Error).message})`);
            return undefined;
          })
        : undefined;
      const victim: Worker = holder ?? drawn;
      if (exclusiveRelay)
        log(`kill-relay: ${victim.config.name}${holder ? ", the relay lock's holder" : ', no holder'}`);
      await kill(victim);
      await sleep(between(random, 200, 1_500));
      return reviveInBackground();
    }
    case 'relay-dies-after-confirm':
    case 'consumer-dies-after-commit': {
      if (kind === 'relay-dies-after-confirm' && activeStandby) return standbyDiesAfterConfirm();
      const group = kind === 'relay-dies-after-confirm' ? relays() : consumers();
      const victim = group[between(random, 0, group.length - 1)]!;
      await kill(victim);
      await spawn(victim, { armed: true });
      // It dies at its next confirm (or commit); a quiet one is taken down after a while anyway.
      const diedThere = await waitUntil(() => !victim.child, 8_000);
      if (diedThere) failpointDeaths++;
      else log(`${victim.config.name} reached no failpoint within 8 s; killed instead`);
      await kill(victim);
      return revive();
    }
    case 'close-amqp-connections':
      return closeOurConnections();
    case 'restart-broker':
      await rabbitmqctl('stop_app');
      await sleep(between(random, 1_000, 3_000));
      await rabbitmqctl('start_app');
      await rabbitmqctl('await_startup');
      brokerRestartedAt = Date.now();
      return;
    case 'terminate-backends': {
      // Through the pooler these are its server connections: PgBouncer sets each one's application_name
      // to its linked client's and leaves it when the client lets go, and only this run's workers use the
      // run's pooler, so every one of them matches. A worker's client connection to PgBouncer survives
      // unless a transaction was under way on the server connection that ended. On the failover pair the
      // injector's pool connects to the writable server: the workers are found on whichever node is primary now.
      const { rowCount } = await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1 AND application_name NOT LIKE '%-injector'`,
        // Leading %: a CDC relay's replication connection is named `converge-cdc <relayId>`.
        [`%chaos-${runId}-%`],
      );
      log(
        `terminate-backends: ${rowCount ?? 0} backends${poolerFaults.url ? " (the pooler's server connections and any direct session)" : ''}`,
      );
      return;
    }
    case 'hold-hot-row-lock':
      return holdHotLock(between(random, 1_000, 4_000));
    case 'duplicate-storm':
      return duplicateStorm(between(random, 50, 300));
    case 'slow-consumer': {
      const victim = consumers()[between(random, 0, 1)]!;
      await stopGracefully(victim);
      await spawn(victim, { slowMs: 20 });
      await sleep(between(random, 3_000, 6_000));
      await stopGracefully(victim);
      return revive();
    }
    case 'bad-message':
      return publishBadMessage();
    case 'pg-restart-fast':
    case 'pg-restart-immediate':
      return pgFaults.inject(kind, random, log);
    case 'restart-pooler':
      return poolerFaults.inject(kind, random, log);
    case 'pg-failover':
      return failoverFaults.inject(kind, random, log, relayMode === 'cdc' ? cdcSlot.slot : undefined);
    default:
      if (isClusterFault(kind) && clusterFaults) return clusterFaults.inject(kind);
      throw new Error(`${kind} needs --cluster`);
  }
}

/**
 * The relay worker that publishes now, if any: whose replication connection holds the slot (cdc),
 * or whose session holds the schema's relay lock (exclusive; the query of docs/relay.md).
 */
async function activeRelay(): Promise<Worker | undefined> {
  const sql =
    relayMode === 'cdc'
      ? `SELECT a.application_name AS name FROM pg_replication_slots s JOIN pg_stat_activity a ON a.pid = s.active_pid
          WHERE s.slot_name = $1`
      : `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
          WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
            AND l.classid = (hashtext('converge.relay')::bigint & 4294967295)::oid
            AND l.objid = to_regnamespace($1)::oid`;
  const { rows } = await pool.query<{ name: string }>(sql, [relayMode === 'cdc' ? cdcSlot.slot : schema]);
  const name = rows[0]?.name;
  return relays().find((w) => name?.endsWith(w.config.name));
}

/**
 * Only the relay holding the slot (cdc) or the relay lock (exclusive) confirms anything; a standby
 * never reaches the failpoint. So the standby is restarted armed first, then the active one is
 * killed (every other relay, should none hold it right now): the armed one takes over and dies at
 * its first confirm, before marking (and, for cdc, acknowledging).
 */
async function standbyDiesAfterConfirm(): Promise<void> {
  // The injector's query fails while PostgreSQL restarts: then every relay but the first is killed.
  const active = await activeRelay().catch(() => undefined);
  const standby = relays().find((w) => w !== active) ?? relays()[0]!;
  await kill(standby);
  await spawn(standby, { armed: true });
  await Promise.all(
    relays()
      .filter((w) => w !== standby)
      .map(kill),
  );
  const diedThere = await waitUntil(() => !standby.child, 15_000);
  if (diedThere) failpointDeaths++;
  else log(`${standby.config.name} reached no failpoint within 15 s; killed instead`);
  await kill(standby);
  return revive();
}

function rabbitmqctl(...args: string[]): Promise<string> {
  return clusterFaults ? clusterFaults.ctl(args) : brokerctl(args, 60_000);
}

async function closeOurConnections(): Promise<void> {
  const listing = await rabbitmqctl('list_connections', 'pid', 'client_properties');
  const ours = listing.split('\n').filter((line) => line.includes(`chaos-${runId}`) || line.includes(queue));
  for (const line of ours)
    await rabbitmqctl('close_connection', line.split('\t')[0]!.trim(), 'chaos').catch(() => undefined);
}

/** Locks a hot aggregate's projection row: the consumers' batches that touch it wait behind the lock. */
async function holdHotLock(ms: number): Promise<void> {
  const client = await pool.connect();
  // A checked-out client has no pool error listener: a PG restart while it waits must not crash the run.
  client.on('error', () => undefined);
  try {
    await client.query('BEGIN');
    await client.query(
      `SELECT 1 FROM ${q}.projection_state WHERE projection = 'chaos' AND aggregate_id = 'o1' FOR UPDATE`,
    );
    await client.query(`SELECT 1 FROM ${q}.chaos_source WHERE id = 'o1' FOR UPDATE`);
    await sleep(ms);
    await client.query('COMMIT');
  } catch {
    await client.query('ROLLBACK').catch(() => undefined);
  } finally {
    client.release();
  }
}

/** Publishes already-published events again, as a second relay or a replay would. */
async function duplicateStorm(count: number): Promise<void> {
  const { rows } = await pool.query<OutboxEnvelopeRow>(
    `SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, schema_version, kind, payload, occurred_at, traceparent, tenant_id
       FROM ${q}.outbox WHERE status = 'published' ORDER BY random() LIMIT $1`,
    [count],
  );
  const connection = await connectBroker();
  try {
    const channel = await connection.createConfirmChannel();
    const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
    for (const row of rows) {
      const message = encodeMessage(outboxRowToEnvelope(row), routingKey);
      channel.publish(exchange, message.routingKey, message.content, message.options);
    }
    await channel.waitForConfirms();
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function publishBadMessage(): Promise<void> {
  const id = `bad-${injectedBad.length + 1}`;
  const connection = await connectBroker();
  try {
    const channel = await connection.createConfirmChannel();
    channel.publish(exchange, 'order.AmountAdded', Buffer.from(`{"eventId":"${id}","payload":`), {
      messageId: id,
      persistent: true,
    });
    await channel.waitForConfirms();
    injectedBad.push(id);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await sleep(100);
  }
  return false;
}

// ---- quiescence and the check ----

async function queueDepth(): Promise<number> {
  const connection = await connectBroker();
  try {
    const channel = await connection.createChannel();
    const main = await channel.checkQueue(queue);
    let waiting = (await channel.checkQueue(`${queue}.retry`)).messageCount;
    for (const tier of retryTiers(queue, DEFAULT_RETRY_TIERS_MS))
      waiting += (await channel.checkQueue(tier.queue)).messageCount;
    // A message waiting in the dead queue is neither applied nor yet quarantined: stuck.
    const dead = queueType === 'quorum' ? await channel.checkQueue(deadQueueName(queue)) : { messageCount: 0 };
    return main.messageCount + waiting + dead.messageCount;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}

const mismatchSql = `
  SELECT count(*) AS n FROM ${q}.chaos_source s
    JOIN ${q}.chaos_projection p USING (id)
    LEFT JOIN ${q}.projection_state ps ON ps.projection = 'chaos' AND ps.aggregate_type = 'order' AND ps.aggregate_id = s.id
   WHERE s.version > 0 AND (s.total <> p.total OR ps.version IS DISTINCT FROM s.version)`;

async function settled(): Promise<boolean> {
  const open = await count(`SELECT count(*) AS n FROM ${q}.outbox WHERE status <> 'published'`);
  const parked = await count(`SELECT count(*) AS n FROM ${q}.parked`);
  if (open > 0 || parked > 0) return false;
  if ((await count(mismatchSql)) > 0) return false;
  return (await queueDepth().catch(() => 1)) === 0;
}

/** What is left when quiescence did not come: ids, positions, states and errors, never payloads. */
async function describeStuck(): Promise<void> {
  const { rows: open } = await pool.query(
    `SELECT event_id, position, status, attempts, broker_retries, claimed_by, last_error, xmin::text AS xmin,
            round(extract(epoch FROM now() - occurred_at)) AS age_s
       FROM ${q}.outbox WHERE status <> 'published' OR claimed_by IS NOT NULL ORDER BY position LIMIT 10`,
  );
  for (const row of open) log(`not published: ${JSON.stringify(row)}`);
  if (relayMode === 'cdc') {
    const { rows: slots } = await pool.query(
      `SELECT active, active_pid, restart_lsn, confirmed_flush_lsn, pg_current_wal_lsn() AS wal_end
         FROM pg_replication_slots WHERE slot_name = $1`,
      [cdcSlot.slot],
    );
    log(`slot: ${JSON.stringify(slots[0] ?? null)}`);
  }
  const { rows: sessions } = await pool.query(
    `SELECT pid, application_name, backend_type, state, wait_event_type, wait_event, left(query, 80) AS query
       FROM pg_stat_activity WHERE application_name LIKE $1 AND application_name NOT LIKE '%-injector'`,
    [`%chaos-${runId}-%`],
  );
  for (const session of sessions) log(`session: ${JSON.stringify(session)}`);
  for (const line of await poolerFaults.describe().catch((err: unknown) => [`pooler: ${(err as Error).message}`]))
    log(line);
  for (const line of await failoverFaults.describe()) log(line);
  log(`workers alive: ${workers.map((w) => `${w.config.name.slice(-10)}=${w.child ? 'yes' : 'no'}`).join(' ')}`);
}

interface Verdict {
  events: number;
  lost: number;
  doubleApplied: number;
  mismatched: number;
  stuck: number;
  details: Record<string, number>;
}

async function check(): Promise<Verdict> {
  const events = await count(`SELECT count(*) AS n FROM ${q}.outbox`);
  const effects = await count(`SELECT count(*) AS n FROM ${q}.chaos_effects`);
  const doubleApplied = await count(
    `SELECT count(*) AS n FROM (SELECT event_id FROM ${q}.chaos_effects GROUP BY event_id HAVING count(*) > 1) d`,
  );
  // A transaction the producers know committed (change()) whose event is not in the outbox now: with
  // --pg failover, a commit the promoted standby never had. A set of ids the database alone cannot give.
  const producedMissing = await count(
    `SELECT count(*) AS n FROM unnest($1::text[]) AS p(event_id) WHERE NOT EXISTS (SELECT 1 FROM ${q}.outbox o WHERE o.event_id = p.event_id)`,
    [[...produced]],
  );
  // An event without an effect of its own is fine only if a later snapshot of its aggregate (which contains it) applied.
  const lost = await count(`
    SELECT count(*) AS n FROM ${q}.outbox o
     WHERE NOT EXISTS (SELECT 1 FROM ${q}.chaos_effects e WHERE e.event_id = o.event_id)
       AND NOT EXISTS (SELECT 1 FROM ${q}.chaos_effects e WHERE e.aggregate_id = o.aggregate_id AND e.kind = 'snapshot' AND e.version > o.aggregate_version)`);
  const coveredBySnapshot =
    (await count(
      `SELECT count(*) AS n FROM ${q}.outbox o WHERE NOT EXISTS (SELECT 1 FROM ${q}.chaos_effects e WHERE e.event_id = o.event_id)`,
    )) - lost;
  const inboxMissing = await count(
    `SELECT count(*) AS n FROM ${q}.outbox o WHERE NOT EXISTS (SELECT 1 FROM ${q}.inbox i WHERE i.consumer = 'chaos' AND i.event_id = o.event_id)`,
  );
  const inboxExtra = await count(
    `SELECT count(*) AS n FROM ${q}.inbox i WHERE i.consumer = 'chaos' AND NOT EXISTS (SELECT 1 FROM ${q}.outbox o WHERE o.event_id = i.event_id)`,
  );
  const projectionMismatch = await count(mismatchSql);
  const reconciled = await reconcileDifferences();
  const unpublished = await count(
    `SELECT count(*) AS n FROM ${q}.outbox WHERE status <> 'published' OR claimed_by IS NOT NULL`,
  );
  const parked = await count(`SELECT count(*) AS n FROM ${q}.parked`);
  const queued = await queueDepth().catch(() => -1);
  const quarantined = await count(`SELECT count(*) AS n FROM ${q}.quarantine`);
  const unexpectedQuarantine = await count(
    `SELECT count(*) AS n FROM ${q}.quarantine WHERE NOT (event_id IS NULL AND convert_from(body, 'UTF8') LIKE '{"eventId":"bad-%')`,
  );
  return {
    events,
    lost: lost + inboxMissing + producedMissing,
    doubleApplied,
    mismatched:
      projectionMismatch +
      reconciled +
      inboxExtra +
      unexpectedQuarantine +
      Math.abs(quarantined - unexpectedQuarantine - injectedBad.length),
    stuck: unpublished + parked + Math.max(0, queued) + (queued < 0 ? 1 : 0),
    details: {
      produced: produced.size,
      producedMissing,
      commitInDoubtThere: commitInDoubt.there,
      commitInDoubtAbsent: commitInDoubt.absent,
      commitInDoubtUnknown: commitInDoubt.unknown,
      effects,
      coveredBySnapshot,
      inboxMissing,
      inboxExtra,
      projectionMismatch,
      reconcileDifferences: reconciled,
      unpublished,
      parked,
      queued,
      quarantined,
      injectedBad: injectedBad.length,
      unexpectedQuarantine,
    },
  };
}

/** The reconciler's view: source rows against projection_state versions and the projection's totals. */
async function reconcileDifferences(): Promise<number> {
  const page =
    (sql: string) =>
    async (after: string | null, limit: number): Promise<ReconcileRow[]> => {
      const { rows } = await pool.query<{ id: string; version: string; total: string }>(sql, [after ?? '', limit]);
      return rows.map((row) => ({ id: row.id, version: Number(row.version), fields: { total: Number(row.total) } }));
    };
  const report = await reconcile(pool, {
    schema,
    projection: 'chaos',
    aggregateType: 'order',
    source: page(
      `SELECT id, version, total FROM ${q}.chaos_source WHERE version > 0 AND id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
    ),
    target:
      page(`SELECT s.aggregate_id AS id, s.version, p.total FROM ${q}.projection_state s JOIN ${q}.chaos_projection p ON p.id = s.aggregate_id
                   WHERE s.projection = 'chaos' AND s.aggregate_id COLLATE "C" > $1 ORDER BY s.aggregate_id COLLATE "C" LIMIT $2`),
  });
  return Object.values(report.differences).reduce((sum, n) => sum + n, 0);
}

/** One defect of each kind: an effect lost, one written twice, a projection off by one, a parked leftover. */
async function sabotage(): Promise<void> {
  log('sabotage: removing one effect, doubling one, skewing one total, leaving one parked event');
  await pool.query(`
    DELETE FROM ${q}.chaos_effects WHERE event_id = (
      SELECT e.event_id FROM ${q}.chaos_effects e
       WHERE e.kind = 'incremental'
         AND NOT EXISTS (SELECT 1 FROM ${q}.chaos_effects s WHERE s.aggregate_id = e.aggregate_id AND s.kind = 'snapshot' AND s.version > e.version)
       LIMIT 1)`);
  await pool.query(`INSERT INTO ${q}.chaos_effects SELECT * FROM ${q}.chaos_effects LIMIT 1`);
  await pool.query(
    `UPDATE ${q}.chaos_projection SET total = total + 1 WHERE id = (SELECT id FROM ${q}.chaos_source WHERE version > 0 LIMIT 1)`,
  );
  await pool.query(
    `INSERT INTO ${q}.parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body)
     VALUES ('chaos', 'sabotage', 'f', 'chaos', 'order', 'o1', 999999, 999998, '{}', '\\x00')`,
  );
}

/** This run's flags with its seed: the command that replays the same faults in the same order. */
function reproduction(): string {
  const args = process.argv.slice(2);
  const withoutSeed = args.filter(
    (arg, i) => arg !== '--seed' && args[i - 1] !== '--seed' && !arg.startsWith('--seed='),
  );
  return ['--seed', String(seed), ...withoutSeed].join(' ');
}

async function cleanup(): Promise<void> {
  producing = false;
  await Promise.all(workers.map(kill));
  // The cluster goes whole, queues and all; the shared broker keeps running, so the run's names are dropped.
  const connection = clusterFaults ? undefined : await connectRabbit().catch(() => undefined);
  await clusterFaults?.teardown().catch((err: unknown) => log(`cluster teardown: ${(err as Error).message}`));
  if (connection) {
    await dropBrokerNames(connection, [queue, exchange]);
    await connection.close().catch(() => undefined);
  }
  // A slot left behind would keep WAL forever.
  if (relayMode === 'cdc')
    await dropCdcSlot(pool, cdcSlot).catch((err: unknown) => log(`slot: ${(err as Error).message}`));
  await pool.query(`DROP SCHEMA IF EXISTS ${q} CASCADE`).catch(() => undefined);
  await pool.end();
  await poolerFaults.stop().catch((err: unknown) => log(`pooler: ${(err as Error).message}`));
  await pgFaults.stop();
  await failoverFaults.stop();
}

async function main(): Promise<number> {
  log(`faults: ${kinds.join(', ')}`);
  log(
    `seed=${seed} duration=${durationMs / 1000}s orders=${orders} rate=${ratePerSecond}/s schema=${schema} queue=${quorum ? 'quorum' : 'classic durable'} postgres=${failoverFaults.pair ? `failover pair :${failoverFaults.pair.ports.primary} -> :${failoverFaults.pair.ports.standby} (synchronous, host list)${relayMode === 'cdc' ? ', cdc failover slot' : ''}` : relayMode === 'cdc' ? 'cdc' : pgFaults.server ? `embedded:${pgFaults.server.port}` : poolerFaults.url ? `shared, workers through pgbouncer:${poolerFaults.port} (transaction pooling)` : 'shared'} relay=${RELAY_HEADER[relayMode]}${flags.cluster ? ' rabbitmq=cluster' : ''}`,
  );
  if (flags.cluster) {
    clusterFaults = await ClusterFaults.start(queue, random, log);
    workers.forEach((w, i) => (w.config.amqpUrl = rotated(clusterFaults!.urls, i)));
  }
  await setup();
  await Promise.all(workers.map((w) => spawn(w)));
  const producing$ = produce();
  const faults: Record<string, number> = {};
  let injected = 0;
  const end = Date.now() + durationMs;
  while (Date.now() < end || (flags['every-kind'] && !everyKindRan(kinds, faults))) {
    await sleep(between(random, 1_000, 3_000));
    // A broker restart waits while the last one is recent (it is slow and hits every connection);
    // a node fault waits while a node boots, a PG restart while the last one is recent.
    const kind = nextFault(
      new Set<FaultKind>([
        ...(Date.now() - brokerRestartedAt < 30_000 ? (['restart-broker'] as const) : []),
        ...(clusterFaults?.deferred() ?? []),
        ...pgFaults.deferred(),
        ...poolerFaults.deferred(),
      ]),
    );
    // Nothing left to draw: the run named only once-per-run faults (pg-failover), and they ran.
    if (kind === undefined) continue;
    log(`fault ${injected + 1}: ${kind}`);
    try {
      await inject(kind);
    } catch (err) {
      log(`fault ${kind} could not be injected fully: ${(err as Error).message.split('\n')[0]}`);
    }
    faults[kind] = (faults[kind] ?? 0) + 1;
    injected++;
    reviveInBackground();
  }
  producing = false;
  await producing$;
  log(
    `faults stop; ${produced.size} events committed (COMMIT in doubt: ${commitInDoubt.there} there, ${commitInDoubt.absent} not, ${commitInDoubt.unknown} unknown); waiting for quiescence (at most ${quiesceMs / 1000} s)`,
  );
  await clusterFaults?.restoreNodes();
  await poolerFaults.restore();
  await revive();
  // A query that fails (a server still finding its feet after a failover) means not settled yet, not the end of the run.
  const quiet = await waitUntil(() => settled().catch(() => false), quiesceMs);
  if (!quiet) {
    log('no quiescence within the bound: the check below counts what is left as stuck');
    await describeStuck().catch((err: unknown) => log(`could not describe what is stuck: ${(err as Error).message}`));
  }
  await Promise.all(workers.map(stopGracefully));
  if (flags.sabotage) await sabotage();
  const verdict = await check();
  console.log(`seed ${seed}; reproduce with: npm run chaos -- ${reproduction()}`);
  console.log(
    `faults by kind: ${Object.entries(faults)
      .map(([k, n]) => `${k}=${n}`)
      .join(' ')}; deaths at a failpoint: ${failpointDeaths}`,
  );
  if (clusterFaults)
    console.log(
      `node faults by how: ${Object.entries(clusterFaults.counts)
        .map(([k, n]) => `${k}=${n}`)
        .join(' ')}`,
    );
  console.log(
    `details: ${Object.entries(verdict.details)
      .map(([k, n]) => `${k}=${n}`)
      .join(' ')}`,
  );
  console.log(
    `faults=${injected} events=${verdict.events} lost=${verdict.lost} double_applied=${verdict.doubleApplied} mismatched=${verdict.mismatched} stuck=${verdict.stuck}`,
  );
  return verdict.lost + verdict.doubleApplied + verdict.mismatched + verdict.stuck === 0 ? 0 : 1;
}

// Ctrl-C (or a CI timeout's SIGTERM) still removes the run's schema, queues and processes.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping and cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    console.error(`chaos: ${(err as Error).stack ?? String(err)}`);
    await cleanup().catch(() => undefined);
    process.exit(1);
  });
