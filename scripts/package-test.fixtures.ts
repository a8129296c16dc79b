/**
 * The consumer project scripts/package-test.ts writes next to the installed tarball. The files are
 * strings, not TypeScript of this repository: they import 'converge-events' as a user does, which
 * only resolves in the scratch project, and they are compiled there under the consumer's own
 * strict tsconfig.
 */

export const CONSUMER_PACKAGE_JSON = {
  name: 'converge-events-consumer',
  version: '0.0.0',
  private: true,
  type: 'module',
};

/** As strict as a consumer gets, and skipLibCheck off: converge's .d.ts files are checked too. */
export const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2022'], // a Node service: no DOM (whose lib alone takes a third of the check time)
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    noImplicitOverride: true,
    verbatimModuleSyntax: true,
    skipLibCheck: false,
    outDir: 'out',
  },
  include: ['src'],
};

/** The same with skipLibCheck on: a missing type package then turns `tx` into `any` silently. */
export const TSCONFIG_SKIP_LIB_CHECK = {
  extends: './tsconfig.json',
  compilerOptions: { skipLibCheck: true, noEmit: true },
};

/**
 * Must compile, and must not: each `@ts-expect-error` line is an error only while the types
 * are real. Were `tx` or `pool` `any`, the directive would be unused, itself an error.
 */
export const TYPES_TS = `\
import { withTransaction, type ConsumerOptions, type HandlerContext, type RelayOptions } from 'converge-events';
import { readStatus } from 'converge-events/ops';
import { serveRelayMetrics } from 'converge-events/metrics';
import { upcast } from 'converge-events/internal';
import type pg from 'pg';

type IsAny<T> = 0 extends 1 & T ? true : false;
export const notAny: [
  IsAny<HandlerContext['tx']>,
  IsAny<NonNullable<ConsumerOptions['pool']>>,
  IsAny<NonNullable<RelayOptions['pool']>>,
  IsAny<Parameters<typeof withTransaction>[0]>,
] = [false, false, false, false];

export const subpaths: unknown[] = [readStatus, serveRelayMetrics, upcast];

export async function handler({ tx }: HandlerContext): Promise<number | null> {
  const { rows, rowCount } = await tx.query<{ n: number }>('SELECT 1 AS n');
  const n: number | undefined = rows[0]?.n;
  // @ts-expect-error pg's query takes SQL text or a QueryConfig, never a number
  await tx.query(42);
  // @ts-expect-error a row is typed by the query's type argument
  const s: string | undefined = rows[0]?.n;
  return n === undefined || s !== undefined ? null : rowCount;
}

export async function inTransaction(pool: pg.Pool): Promise<void> {
  await withTransaction(pool, async (client) => {
    // @ts-expect-error the transaction's client is a pg.PoolClient
    client.release('not a boolean or an error');
  });
}
`;

/** CommonJS: compiled to out/require.cjs, whose \`require()\` calls load the ESM build (Node >= 20.19). */
export const REQUIRE_CTS = `\
import converge = require('converge-events');
import ops = require('converge-events/ops');
import metrics = require('converge-events/metrics');
import errors = require('converge-events/errors');
import internal = require('converge-events/internal');

const entries: Array<[string, unknown]> = [
  ['converge-events', converge.startConsumer],
  ['converge-events/ops', ops.readStatus],
  ['converge-events/metrics', metrics.serveRelayMetrics],
  ['converge-events/errors', errors.ConfigError],
  ['converge-events/internal', internal.upcast],
];
for (const [entry, value] of entries) {
  if (typeof value !== 'function') throw new Error(\`require('\${entry}') did not return its exports\`);
}
const error: errors.ConvergeError = new errors.ConfigError('schema', 'example');
if (!(error instanceof errors.ConvergeError)) throw new Error('error classes lost their prototype chain');
if (!converge.migrationSql('cjs_check').includes('"cjs_check".outbox')) throw new Error('migrationSql returned no DDL');
console.log('require ok: ' + entries.map(([entry]) => entry).join(', '));
`;

/**
 * The three steps of the guide, as a service runs them: write an event with the business change,
 * relay it, consume it into a versioned projection; then check every stage and close everything
 * (a handle left open keeps the process alive, and the package test fails it on its timeout).
 */
export const SAMPLE_TS = `\
import assert from 'node:assert/strict';
import pg from 'pg';
import {
  createConverge,
  defineEvents,
  readProjectionState,
  withTransaction,
  type EventOf,
  type HandlerContext,
  type Settlement,
} from 'converge-events';

const orderEvents = defineEvents<{ AmountAdded: { delta: number } }>();

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(\`\${name} is not set\`);
  return value;
}
const connectionString = env('DATABASE_URL');
const amqpUrl = env('AMQP_URL');
const name = env('SAMPLE_NAME'); // unique per run: converge's schema, the exchange and the queue
const schema = name;
const readModel = \`"\${schema}".order_totals\`;

const pool = new pg.Pool({ connectionString, max: 10 });
await pool.query(\`CREATE TABLE \${readModel} (id text PRIMARY KEY, amount integer NOT NULL)\`);
// The front door: what the installation shares, given once.
const converge = createConverge({ pool, amqpUrl, schema, exchange: name, events: orderEvents });

// Write: the event commits with the business change, on the same transaction.
await withTransaction(pool, async (tx) => {
  await converge.append(tx, {
    aggregateType: 'order',
    aggregateId: 'o-1',
    aggregateVersion: 1,
    eventType: 'AmountAdded',
    payload: { delta: 10 },
  });
});

// Consume into a projection. Started first, so its queue is bound before anything is published.
async function addAmount(event: EventOf<typeof orderEvents, 'AmountAdded'>, ctx: HandlerContext): Promise<void> {
  await ctx.applyIncrement({ projection: 'order_totals', event }, () =>
    ctx.tx.query(
      \`INSERT INTO \${readModel} (id, amount) VALUES ($1, $2)
       ON CONFLICT (id) DO UPDATE SET amount = order_totals.amount + EXCLUDED.amount\`,
      [event.aggregateId, event.payload.delta],
    ),
  );
}
const consumer = converge.startConsumer({ queue: name, handlers: { AmountAdded: addAmount } });
const settled = new Promise<Settlement>((resolve, reject) => {
  consumer.once('settled', resolve);
  consumer.on('error', reject);
});
await consumer.ready();

// Relay: publish with confirms, mark published.
converge.startRelay();
const settlement = await settled;
await converge.close(); // stops the relay and the consumer; the pool stays ours

try {
  assert.deepEqual({ action: settlement.action, outcome: 'outcome' in settlement ? settlement.outcome : undefined }, {
    action: 'ack',
    outcome: 'applied',
  });
  const outbox = await pool.query<{ status: string }>(\`SELECT status FROM "\${schema}".outbox\`);
  assert.deepEqual(outbox.rows, [{ status: 'published' }], 'the relay marked the event published');
  const model = await pool.query<{ amount: number }>(\`SELECT amount FROM \${readModel} WHERE id = $1\`, ['o-1']);
  assert.deepEqual(model.rows, [{ amount: 10 }], 'the read model holds the event');
  const state = await readProjectionState(pool, { schema, projection: 'order_totals', aggregateType: 'order', aggregateId: 'o-1' });
  assert.equal(state?.version, 1, 'the projection is at version 1');
  console.log(\`sample ok: published, consumed, read model amount 10 at version \${state.version}\`);
} finally {
  await pool.end();
}
`;
