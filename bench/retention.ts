/**
 * `npm run bench:retention [-- --rows N] [--baseline-seconds S] [--batch-size B] [--layout plain|partitioned|both]`
 *
 * Retention on N processed outbox rows and N inbox rows (default 1M each; issue 29 asks for 20M by
 * hand), both ways converge does it: `cleanup` DELETEing them in batches on the plain layout, and
 * `cleanup` dropping the whole past partitions that hold them on a partitioned schema. For each:
 * elapsed time, WAL written, schema size before and after, and what it did to a live relay drain
 * on the same tables (events/s and the longest stall while retention runs, beside a window of the
 * same load without it). Prints numbers only; progress goes to stderr. Everything it creates is
 * removed at the end, also after a failure or Ctrl-C.
 */
import { parseArgs } from 'node:util';
import { cleanup, type CleanupResult } from '../src/ops/index.js';
import { quoteIdentifier } from '../src/runtime/identifier.js';
import { assertLoopback, checkpoint, Cleanup, note, openBroker, openPool, sleep, type BenchContext } from './env.js';
import { LiveLoad, walBytesSince, walLsn, type WindowStats } from './retention-load.js';
import { createRetentionSchema, DAY_MS, type Layout } from './retention-seed.js';

const USAGE =
  'usage: npm run bench:retention -- [--rows N] [--baseline-seconds S] [--batch-size B] [--layout plain|partitioned|both]';

function positiveInt(name: string, raw: string): number {
  const value = Number(raw.replace(/_/g, ''));
  if (!Number.isInteger(value) || value < 1) {
    console.error(`--${name} must be a positive integer (got ${raw})\n${USAGE}`);
    process.exit(2);
  }
  return value;
}

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    'baseline-seconds': { type: 'string', default: '30' },
    // cleanup's own default: what a service gets without tuning it.
    'batch-size': { type: 'string', default: '1000' },
    layout: { type: 'string', default: 'both' },
  },
  strict: true,
});
const ROWS = positiveInt('rows', flags.rows);
const BASELINE_MS = positiveInt('baseline-seconds', flags['baseline-seconds']) * 1000;
const BATCH_SIZE = positiveInt('batch-size', flags['batch-size']);
const LAYOUTS: Layout[] = flags.layout === 'both' ? ['plain', 'partitioned'] : [flags.layout as Layout];
if (!LAYOUTS.every((layout) => layout === 'plain' || layout === 'partitioned')) {
  console.error(`--layout must be plain, partitioned or both (got ${flags.layout})\n${USAGE}`);
  process.exit(2);
}
/** The relay's warm-up before the first window: connections open, backlog at its level. */
const WARMUP_MS = 5_000;
/** Seeding runs at roughly 100k rows/s per table here; the bound leaves room for a slow disk. */
const SEED_TIMEOUT_MS = 600_000 + ROWS * 0.1;

/** Seeded rows are 8-17 days old; the live load's are seconds old and must survive. */
const RETENTION = {
  outboxRetentionMs: 7 * DAY_MS,
  inboxRetentionMs: 7 * DAY_MS,
  retryHorizonMs: DAY_MS,
  quarantineReplayWindowMs: 3 * DAY_MS,
};

interface LayoutResult {
  layout: Layout;
  removed: string;
  baseline: WindowStats;
  retention: WindowStats;
  /** WAL of the retention window less what the load wrote for as many events in the baseline. */
  retentionWalBytes: number;
}

/** One window of the live load around `work`: events published, the longest stall, WAL written. */
async function window<T>(ctx: BenchContext, load: LiveLoad, work: () => Promise<T>): Promise<[WindowStats, T]> {
  const lsn = await walLsn(ctx.pool);
  const published = load.published;
  load.takeLowestBacklog();
  const from = performance.now();
  const result = await work();
  const to = performance.now();
  const count = load.published - published;
  const walBytes = await walBytesSince(ctx.pool, lsn);
  load.check();
  const seconds = (to - from) / 1000;
  const stats = { seconds, published: count, rate: count / seconds, walBytes };
  return [{ ...stats, maxGapMs: load.maxGapMs(from, to), lowestBacklog: load.takeLowestBacklog() }, result];
}

function describeRemoval(layout: Layout, result: CleanupResult): string {
  if (layout === 'plain') return `${result.outboxDeleted} outbox + ${result.inboxDeleted} inbox rows deleted`;
  const kept = result.partitions?.kept.map((k) => `${k.partition} (${k.reason})`).join(', ');
  return `${result.partitions?.dropped.length ?? 0} partitions dropped${kept ? `, kept: ${kept}` : ''}`;
}

async function measureLayout(ctx: BenchContext, layout: Layout): Promise<LayoutResult> {
  const schema = await createRetentionSchema(ctx, layout, ROWS, SEED_TIMEOUT_MS);
  const load = new LiveLoad(ctx.pool, schema);
  await load.start(ctx);
  await sleep(WARMUP_MS);
  await checkpoint(ctx.pool);
  note(`retention: ${layout}: baseline window, ${BASELINE_MS / 1000} s of the load alone`);
  const [baseline] = await window(ctx, load, () => sleep(BASELINE_MS));
  note(`retention: ${layout}: cleanup beside the load`);
  const [retention, result] = await window(ctx, load, () =>
    cleanup(ctx.pool, { schema, ...RETENTION, batchSize: BATCH_SIZE }),
  );
  await load.stop();
  const loadWalPerEvent = baseline.walBytes / Math.max(1, baseline.published);
  await ctx.pool.query(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`);
  return {
    layout,
    removed: describeRemoval(layout, result),
    baseline,
    retention,
    retentionWalBytes: retention.walBytes - loadWalPerEvent * retention.published,
  };
}

const mb = (bytes: number) => (bytes / 1_048_576).toFixed(0);
const int = (n: number) => Math.round(n).toLocaleString('en-US');

function render(results: LayoutResult[]): string {
  const lines = [
    `retention of ${int(ROWS)} published outbox rows + ${int(ROWS)} inbox rows, cleanup batchSize ${BATCH_SIZE}, ` +
      `beside a relay draining a topped-up backlog (batchSize 1000, concurrency 4)`,
    '',
    `| | ${results.map((r) => (r.layout === 'plain' ? 'DELETE (plain layout)' : 'partition drop')).join(' | ')} |`,
    `| --- |${' --- |'.repeat(results.length)}`,
  ];
  const row = (label: string, cell: (r: LayoutResult) => string) =>
    lines.push(`| ${label} | ${results.map(cell).join(' | ')} |`);
  row('removed', (r) => r.removed);
  row('cleanup time (s)', (r) => r.retention.seconds.toFixed(2));
  row('WAL during cleanup, total (MB)', (r) => mb(r.retention.walBytes));
  row("WAL during cleanup, less the load's (MB)", (r) => mb(r.retentionWalBytes));
  row('WAL during cleanup less the load (bytes)', (r) => int(r.retentionWalBytes));
  row('relay drain during cleanup (events/s)', (r) => int(r.retention.rate));
  row(`relay drain, load alone (events/s, ${BASELINE_MS / 1000} s)`, (r) => int(r.baseline.rate));
  row('drain ratio (during / alone)', (r) => (r.retention.rate / r.baseline.rate).toFixed(2));
  row('longest relay stall during cleanup (ms)', (r) => int(r.retention.maxGapMs));
  row('longest relay stall, load alone (ms)', (r) => int(r.baseline.maxGapMs));
  row(
    'fewest events waiting, during / alone',
    (r) => `${int(r.retention.lowestBacklog)} / ${int(r.baseline.lowestBacklog)}`,
  );
  return lines.join('\n');
}

async function main(): Promise<number> {
  assertLoopback();
  const ctx: BenchContext = { pool: await openPool(8), broker: await openBroker(), schema: '', cleanup: new Cleanup() };
  const stopOnSignal = () => void ctx.cleanup.runAll().finally(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  const results: LayoutResult[] = [];
  try {
    for (const layout of LAYOUTS) results.push(await measureLayout(ctx, layout));
    console.log(render(results));
    return 0;
  } catch (err) {
    console.error(`retention bench failed: ${(err as Error).stack ?? String(err)}`);
    if (results.length > 0) console.log(render(results));
    return 1;
  } finally {
    const failures = await ctx.cleanup.runAll();
    for (const failure of failures) console.error(`cleanup: ${failure}`);
    await ctx.broker.close().catch(() => undefined);
    await ctx.pool.end();
  }
}

void main().then((code) => (process.exitCode = code));
