/**
 * Lag budgets against real PostgreSQL: `converge status` (readPipelineStatus and its table) and
 * the metrics judge the p99 end-to-end lag from inbox rows (occurredAt → received_at, as the
 * consumer records them) against each budget: over it a warning and a gauge at 1, within it none.
 */
import assert from 'node:assert/strict';
import { readPipelineStatus } from '../../src/ops/index.js';
import { registerConvergenceMetrics } from '../../src/metrics/index.js';
import { formatStatus } from '../../src/cli/commands/status.js';
import { cli } from '../support/cli.js';
import { after, before, createTestSchema, describe, it, type TestDatabase } from '../support/rig.js';

describe('lag budgets', () => {
  let db: TestDatabase;

  before(async () => {
    db = await createTestSchema('cvt_lagb');
    // search applied its events 8 s after they happened, billing within 0.2 s.
    await db.pool.query(
      `INSERT INTO "${db.schema}".inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at, occurred_at)
       SELECT c.consumer, c.consumer || '-' || n, 'f', 'order', 'o' || n, 1, 'AmountAdded', now(), now() - c.lag
         FROM generate_series(1, 20) AS n,
              (VALUES ('search', interval '8 seconds'), ('billing', interval '200 milliseconds')) AS c(consumer, lag)`,
    );
  });

  after(async () => {
    await db?.close();
  });

  it('status warns for the consumer over its budget only, and its table shows both budgets', async () => {
    const status = await readPipelineStatus(db.pool, {
      schema: db.schema,
      sampleMs: 0,
      lagBudgets: { search: 5_000, billing: 1_000, idle: 1_000 },
    });
    assert.deepEqual(
      status.lagBudgets.map((b) => [b.name, b.overBudget, b.events]),
      [
        ['search', true, 20],
        ['billing', false, 20],
        ['idle', false, 0],
      ],
    );
    assert.ok(status.lagBudgets[0]!.p99Seconds! >= 8);
    const lagFindings = status.findings.filter((f) => f.kind === 'lag-over-budget');
    assert.deepEqual(
      lagFindings.map((f) => [f.subject, f.severity, f.stage]),
      [['search', 'warning', 'projection']],
    );
    assert.equal(status.stalled, false);
    const table = formatStatus(status);
    assert.match(table, /lag budget search\s+WARNING/);
    assert.match(table, /lag budget billing\s+ok/);
    assert.match(table, /no event recorded by idle/);
  });

  it('converge status --lag-budget prints the warning and still exits 0 (over budget is no stall)', async () => {
    const result = await cli([
      '--schema',
      db.schema,
      'status',
      '--sample-ms',
      '0',
      '--lag-budget',
      'search=5s',
      '--lag-budget',
      'billing=1s',
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /lag budget search\s+WARNING\s+p99 8\.\d s over 20 event\(s\), budget 5\.0 s/);
    assert.match(result.stdout, /lag budget billing\s+ok/);
    assert.match(result.stdout, /WARNING projection: lag-over-budget \(search\)/);
  });

  it('the metrics expose the budget, the p99 lag and over-budget per consumer', async () => {
    const registry = registerConvergenceMetrics(db.pool, {
      schema: db.schema,
      lagBudgets: { search: 5_000, billing: 1_000 },
    });
    const text = await registry.metrics();
    const value = (name: string, consumer: string) => {
      const match = new RegExp(`^${name}\\{consumer="${consumer}"\\} (\\S+)$`, 'm').exec(text);
      assert.ok(match, `${name}{consumer="${consumer}"} in\n${text}`);
      return Number(match[1]);
    };
    assert.equal(value('converge_lag_budget_seconds', 'search'), 5);
    assert.equal(value('converge_lag_over_budget', 'search'), 1);
    assert.ok(value('converge_lag_p99_seconds', 'search') >= 8);
    assert.equal(value('converge_lag_budget_seconds', 'billing'), 1);
    assert.equal(value('converge_lag_over_budget', 'billing'), 0);
    assert.ok(value('converge_lag_p99_seconds', 'billing') < 1);
  });
});
