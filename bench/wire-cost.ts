/**
 * What one message costs the broker, by wire shape: the raw confirmed publish rate of the same
 * envelope body sent as earlier versions did (the envelope mirrored in a header table) and as
 * encodeMessage sends it now (no header table; the partition key in `correlation_id`), with
 * and without a traceparent. No database, no relay: only publish → confirm.
 *
 *   npx tsx bench/wire-cost.ts [--count 50000] [--reps 5] [--target queue,partitions] [--shapes old,new,…]
 *
 * `queue`: topic exchange → one durable classic queue. `partitions`: topic exchange → a
 * consistent-hash exchange (hash-header x-aggregate-id for the old shape, hash-property
 * correlation_id for the new) → 4 durable classic queues, as declarePartitionedTopology does.
 * Repetitions run interleaved (old, new, … then again) so background load hits every shape
 * alike; every run is printed on stderr, medians on stdout. Everything it declares is deleted.
 *
 * On a shared, loaded machine the rate says more about the neighbours than about the message, so
 * the CPU time RabbitMQ's node (beam.smp, found in /proc) spent per message is reported as well:
 * what a message costs the broker, whatever else waits for a core. Other clients of the same
 * broker add to it alike for every shape; interleaving and medians keep that fair.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type amqp from 'amqplib';
import type { EventEnvelope } from '../src/envelope/envelope.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, legacyHeaders, routingKeyFromTemplate } from '../src/transport/wire.js';
import { assertLoopback, openBroker, unique } from './env.js';
import { publishWindowed, type Outgoing } from './raw.js';
import { median } from './stats.js';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '50000' },
    reps: { type: 'string', default: '5' },
    target: { type: 'string', default: 'queue,partitions' },
    shapes: { type: 'string', default: 'old,new,old-traced,new-traced,new-traced-no-header' },
  },
});
const COUNT = Number(values.count);
const REPS = Number(values.reps);
const TARGETS = values.target.split(',') as Target[];
const PARTITIONS = 4;
const AGGREGATES = 10_000;
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
/** Two masked paths, as `defineEvents(schemas, { sensitive: { Deposited: ['note', 'payer.email'] } })` records them. */
const SENSITIVE_FIELDS = 'note,payer.email';

type Target = 'queue' | 'partitions';
type Headers = 'legacy' | 'lean' | 'none';

interface Shape {
  id: string;
  name: string;
  traced: boolean;
  /** legacy: the old header table; lean: what encodeMessage sends; none: lean without even traceparent. */
  headers: Headers;
  /** Sent with the outbox row's sensitive_fields, as every event of a catalog that declares some is. */
  sensitive?: boolean;
}

const ALL_SHAPES: Shape[] = [
  { id: 'old', name: 'old (5 headers)', traced: false, headers: 'legacy' },
  { id: 'new', name: 'new (no headers)', traced: false, headers: 'lean' },
  { id: 'old-traced', name: 'old traced (6 headers)', traced: true, headers: 'legacy' },
  { id: 'new-traced', name: 'new traced (traceparent header)', traced: true, headers: 'lean' },
  { id: 'new-traced-no-header', name: 'new traced, no header', traced: true, headers: 'none' },
  { id: 'new-sensitive', name: 'new, x-converge-sensitive header', traced: false, headers: 'lean', sensitive: true },
];
const SHAPES = values.shapes.split(',').map((id) => {
  const shape = ALL_SHAPES.find((s) => s.id === id);
  if (!shape) throw new Error(`unknown shape ${id}; known: ${ALL_SHAPES.map((s) => s.id).join(', ')}`);
  return shape;
});

const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

/** The RabbitMQ node on this machine, if /proc shows it. */
function brokerPid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'beam.smp') return Number(entry);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return undefined;
}

/** utime + stime of `pid` in ms. */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
}

function envelope(i: number, traced: boolean): EventEnvelope {
  return {
    eventId: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`,
    aggregateType: 'account',
    aggregateId: `a-${i % AGGREGATES}`,
    aggregateVersion: Math.floor(i / AGGREGATES) + 1,
    eventType: 'Deposited',
    schemaVersion: 1,
    kind: 'incremental',
    payload: { delta: 1, note: 'x'.repeat(40) },
    occurredAt: new Date(1_796_205_600_000 + i).toISOString(),
    ...(traced ? { traceparent: TRACEPARENT } : {}),
  };
}

/** The same body in every shape; only the properties and headers differ. */
function message(shape: Shape, exchange: string, i: number): Outgoing {
  const encoded = encodeMessage(envelope(i, shape.traced), routingKey, shape.sensitive ? SENSITIVE_FIELDS : null);
  const options = { ...encoded.options };
  if (shape.headers === 'legacy') {
    delete options.correlationId;
    options.headers = legacyHeaders(envelope(i, shape.traced));
  } else if (shape.headers === 'none') delete options.headers;
  return { exchange, routingKey: encoded.routingKey, content: encoded.content, options };
}

interface Rig {
  /** Entry exchange per header style (old shapes need the header-hashing exchange). */
  exchange(headers: Headers): string;
  purge(): Promise<void>;
  remove(): Promise<void>;
}

async function declare(channel: amqp.Channel, target: Target): Promise<Rig> {
  const base = unique(`bench.wire.${target}`);
  const queues: string[] = [];
  const exchanges: string[] = [];
  const entry = (style: 'header' | 'property') => `${base}.${style}`;
  for (const style of ['header', 'property'] as const) {
    await channel.assertExchange(entry(style), 'topic', { durable: true });
    exchanges.push(entry(style));
    if (target === 'queue') {
      const queue = `${entry(style)}.q`;
      await channel.assertQueue(queue, { durable: true });
      await channel.bindQueue(queue, entry(style), '#');
      queues.push(queue);
      continue;
    }
    const hash = `${entry(style)}.hash`;
    const args = style === 'header' ? { 'hash-header': 'x-aggregate-id' } : { 'hash-property': 'correlation_id' };
    await channel.assertExchange(hash, 'x-consistent-hash', { durable: true, arguments: args });
    exchanges.push(hash);
    for (let p = 0; p < PARTITIONS; p++) {
      const queue = `${hash}.p${p}`;
      await channel.assertQueue(queue, { durable: true });
      await channel.bindQueue(queue, hash, '1');
      queues.push(queue);
    }
    await channel.bindExchange(hash, entry(style), '#');
  }
  return {
    exchange: (headers) => entry(headers === 'legacy' ? 'header' : 'property'),
    async purge() {
      for (const queue of queues) await channel.purgeQueue(queue);
    },
    async remove() {
      for (const queue of queues) await channel.deleteQueue(queue);
      for (const exchange of exchanges) await channel.deleteExchange(exchange);
    },
  };
}

async function main(): Promise<void> {
  assertLoopback();
  const connection = await openBroker();
  const admin = await connection.createChannel();
  const rigs = new Map<Target, Rig>();
  const rates = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const broker = brokerPid();
  try {
    for (const target of TARGETS) rigs.set(target, await declare(admin, target));
    const channel = await connection.createConfirmChannel();
    // Warm-up: the first publishes of a connection pay for JIT and queue start-up.
    for (const [, rig] of rigs) {
      for (const shape of SHAPES)
        await publishWindowed(channel, 2000, (i) => message(shape, rig.exchange(shape.headers), i));
      await rig.purge();
    }
    for (let rep = 1; rep <= REPS; rep++) {
      for (const [target, rig] of rigs) {
        // Rotated per repetition, so no shape always runs first (or right after another).
        for (let k = 0; k < SHAPES.length; k++) {
          const shape = SHAPES[(k + rep) % SHAPES.length]!;
          const exchange = rig.exchange(shape.headers);
          const cpuBefore = cpuMs(broker);
          const started = performance.now();
          await publishWindowed(channel, COUNT, (i) => message(shape, exchange, i));
          const rate = (COUNT * 1000) / (performance.now() - started);
          const usPerMessage = ((cpuMs(broker) - cpuBefore) * 1000) / COUNT;
          await rig.purge();
          const key = `${target} | ${shape.name}`;
          rates.set(key, [...(rates.get(key) ?? []), rate]);
          cpu.set(key, [...(cpu.get(key) ?? []), usPerMessage]);
          process.stderr.write(
            `rep ${rep} ${key}: ${Math.round(rate)} msg/s, broker CPU ${usPerMessage.toFixed(1)} µs/msg\n`,
          );
        }
      }
    }
    await channel.close();
  } finally {
    for (const [, rig] of rigs) await rig.remove().catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
  console.log(
    `wire cost: ${COUNT} confirmed persistent publishes per run, ${REPS} interleaved repetitions, window 1000`,
  );
  console.log('| target | shape | median msg/s | runs (msg/s) | median broker CPU µs/msg | runs (µs/msg) |');
  console.log('|---|---|---:|---|---:|---|');
  for (const [key, list] of rates) {
    const [target, shape] = key.split(' | ');
    const costs = cpu.get(key) ?? [];
    const runs = list.map((r) => Math.round(r)).join(', ');
    const costRuns = costs.map((c) => c.toFixed(1)).join(', ');
    console.log(
      `| ${target} | ${shape} | ${Math.round(median(list))} | ${runs} | ${median(costs).toFixed(1)} | ${costRuns} |`,
    );
  }
}

await main();
