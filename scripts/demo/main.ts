/**
 * `npm run demo`: an orders service (HTTP API on 127.0.0.1), the relay, and two consumers keeping a
 * search projection (snapshots) and a statistics projection (incremental events), driven by a load
 * generator for `--duration` seconds (default 20), with a live view of the pipeline every second.
 * Then it waits for the projections to equal the source, prints one `check:` line, and removes what
 * it created (schema, exchange, queues). Ctrl-C ends the load early; a second one skips the check.
 *
 * Run through scripts/local-env.ts (package.json), which picks the services: DATABASE_URL and AMQP_URL here,
 * or CONVERGE_TRANSPORT=in-process when no RabbitMQ is reachable.
 */
import { setTimeout as delay } from 'node:timers/promises';
import {
  AMQP_URL,
  DATABASE_URL,
  connectPostgres,
  connectRabbit,
  dropBrokerNames,
  uniqueName,
} from '../../kit/services.js';
import { parseCommandLine } from '../../kit/command-line.js';
import {
  createInProcessTransport,
  migrate,
  startRelay,
  type Consumer,
  type InProcessTransport,
  type Relay,
} from '../../src/index.js';
import { runLoad } from './load.js';
import { startSearch, startStatistics, type ConsumerBase } from './projections.js';
import { OrdersService, serve } from './service.js';
import { createTables } from './store.js';
import { converged, formatPipeline, readDifferences, readPipeline } from './watch.js';

const USAGE = [
  'usage: npm run demo -- [--duration <seconds>] [--settle <seconds>]',
  '  --duration  seconds of load (default 20)',
  '  --settle    seconds to wait for the projections to converge afterwards (default 60)',
].join('\n');
const values = parseCommandLine(USAGE, {
  duration: { type: 'string', default: '20' },
  settle: { type: 'string', default: '60' },
});
const seconds = Number(values.duration);
const settleSeconds = Number(values.settle);
if (!(seconds > 0) || !(settleSeconds > 0)) {
  console.error(USAGE);
  process.exit(2);
}

/**
 * scripts/local-env.ts sets CONVERGE_TRANSPORT=in-process when no RabbitMQ is reachable: then one
 * in-process transport carries everything, shared by the relay and both consumers (it is a broker
 * in this process's memory: all three must use the same one). Undefined means RabbitMQ at AMQP_URL.
 */
function transportFor(): InProcessTransport | undefined {
  return process.env.CONVERGE_TRANSPORT === 'in-process' ? createInProcessTransport() : undefined;
}

let interrupts = 0;
let lastSignal = 0;
const onSignal = () => {
  // One Ctrl-C can arrive more than once (the terminal signals the process group, and the launcher
  // passes it on): signals within a second count as one.
  if (Date.now() - lastSignal < 1000) return;
  lastSignal = Date.now();
  interrupts++;
  process.stdout.write(
    interrupts === 1 ? '\nstopping the load (Ctrl-C again to skip the check)\n' : '\nskipping the check\n',
  );
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const transport = transportFor();
const pool = await connectPostgres(10);
// RabbitMQ only: an admin connection to delete the demo's exchange and queues afterwards.
const broker = transport ? undefined : await connectRabbit();
const schema = uniqueName('demo');
const exchange = uniqueName('demo.events');
const queues = { search: uniqueName('demo.search'), statistics: uniqueName('demo.statistics') };
const link = transport ? { transport } : { amqpUrl: AMQP_URL };
const base: ConsumerBase = { connectionString: DATABASE_URL, ...link, schema, exchange };
const consumers: Pick<Consumer, 'stop'>[] = [];
let relay: Relay | undefined;
let api: { url: string; close(): Promise<void> } | undefined;
let live: NodeJS.Timeout | undefined;
let ok = false;
try {
  await migrate(pool, { schema });
  await createTables(pool, schema);
  // Consumers first: they declare the exchange and bind their queues before anything is published.
  for (const consumer of [startSearch(base, queues.search), startStatistics(base, queues.statistics)]) {
    consumer.on('error', () => undefined); // retried inside; the view shows the lag
    consumers.push(consumer);
    await consumer.ready();
  }
  relay = startRelay({ connectionString: DATABASE_URL, ...link, schema, exchange });
  relay.on('error', () => undefined);
  const service = new OrdersService(pool, schema);
  api = await serve(service);
  console.log(`demo: orders API on ${api.url}, schema ${schema}, load for ${seconds} s`);

  const started = Date.now();
  const tty = process.stdout.isTTY;
  let shown = '';
  const show = async () => {
    const line = formatPipeline(
      (Date.now() - started) / 1000,
      service.written,
      await readPipeline(pool, schema, queues),
    );
    // The final view often lands in the same second as the last tick, with nothing changed since.
    if (line === shown) return;
    shown = line;
    process.stdout.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
  };
  // One view at a time: a tick still reading when the final view is drawn would print its line after it.
  let drawing: Promise<void> = Promise.resolve();
  live = setInterval(() => {
    drawing = drawing.then(show).catch(() => undefined);
  }, 1000);
  const load = await runLoad(api.url, { seconds, stopped: () => interrupts > 0 });
  if (tty) process.stdout.write('\n');
  console.log(
    `load: ${load.requests} requests: ${load.placed} orders placed, ${load.changed} status changes, ` +
      `${load.conflicts} refused as concurrent (409), ${load.failed} failed`,
  );

  // Convergence: the load stopped; wait (bounded) until every event is applied and both read models equal the source.
  const settled = Date.now();
  let pipeline = await readPipeline(pool, schema, queues);
  let differences = await readDifferences(pool, schema);
  while (!converged(pipeline, differences) && Date.now() - settled < settleSeconds * 1000 && interrupts < 2) {
    await delay(200);
    [pipeline, differences] = await Promise.all([readPipeline(pool, schema, queues), readDifferences(pool, schema)]);
  }
  clearInterval(live);
  await drawing;
  await show();
  if (tty) process.stdout.write('\n');
  ok = converged(pipeline, differences);
  const after = ((Date.now() - settled) / 1000).toFixed(1);
  console.log(
    ok
      ? `check: converged: ${differences.orders} orders, search and statistics equal the source ` +
          `(${pipeline.published} events published, all applied; ${after} s after the load)`
      : `check: NOT converged after ${after} s: search ${differences.search} and statistics ${differences.statistics} ` +
          `rows differ, outbox pending ${pipeline.pending}, applied search ${pipeline.search.applied}/${pipeline.search.written}, ` +
          `statistics ${pipeline.statistics.applied}/${pipeline.statistics.written}`,
  );
} finally {
  clearInterval(live);
  await api?.close();
  await relay?.stop();
  for (const consumer of consumers) await consumer.stop();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  if (broker) {
    await dropBrokerNames(broker, [queues.search, queues.statistics, exchange]);
    await broker.close();
  }
  // Its queues and exchange live in its memory and go with it.
  await transport?.close();
  await pool.end();
  console.log(`cleanup: removed schema ${schema}, exchange ${exchange}, queues ${queues.search} ${queues.statistics}`);
}
process.exitCode = ok ? 0 : 1;
