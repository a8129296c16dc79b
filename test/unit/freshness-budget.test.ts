/** Lag budgets, pure: which consumer a budget names, when it is exceeded, the finding, the CLI flag. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from 'commander';
import { judgeLagBudgets, lagBudgetFindings } from '../../src/ops/lag-budget.js';
import { parseLagBudget } from '../../src/cli/commands/status.js';

const lag = (consumer: string, p99Seconds: number) => ({
  consumer,
  p50Seconds: p99Seconds / 2,
  p99Seconds,
  maxSeconds: p99Seconds + 1,
  events: 10,
});

describe('judgeLagBudgets', () => {
  it('finds a projection through the watched queue that names it, any other name as an inbox scope', () => {
    const judged = judgeLagBudgets(
      { order_search: 5_000, billing: 5_000 },
      [lag('search', 6), lag('billing', 1)],
      [{ consumer: 'search', projection: 'order_search' }],
    );
    assert.deepEqual(
      judged.map((b) => [b.name, b.consumer, b.p99Seconds, b.overBudget]),
      [
        ['order_search', 'search', 6, true],
        ['billing', 'billing', 1, false],
      ],
    );
  });

  it('is over budget only strictly above it, and never without events in the window', () => {
    const judged = judgeLagBudgets({ a: 2_000, b: 2_000 }, [lag('a', 2)]);
    assert.deepEqual(
      judged.map((b) => [b.overBudget, b.p99Seconds, b.events]),
      [
        [false, 2, 10],
        [false, null, 0],
      ],
    );
  });

  it('one warning per budget exceeded, naming the numbers and never stalling the pipeline', () => {
    const findings = lagBudgetFindings(
      judgeLagBudgets({ search: 5_000, billing: 5_000 }, [lag('search', 12.5), lag('billing', 1)]),
      60,
    );
    assert.equal(findings.length, 1);
    assert.deepEqual(
      [findings[0]!.kind, findings[0]!.severity, findings[0]!.subject],
      ['lag-over-budget', 'warning', 'search'],
    );
    assert.equal(
      findings[0]!.evidence,
      'p99 lag 12.5 s (max 13.5 s) over 10 event(s) recorded by search in the last 60 s; budget 5.0 s',
    );
  });
});

describe('--lag-budget', () => {
  it('takes name=duration, repeatable', () => {
    assert.deepEqual(parseLagBudget('billing=250ms', parseLagBudget('search=5s')), { search: 5_000, billing: 250 });
  });

  it('refuses a missing name, a missing or bad duration and zero', () => {
    for (const bad of ['5s', '=5s', 'search=', 'search=fast', 'search=0'])
      assert.throws(() => parseLagBudget(bad), InvalidArgumentError, bad);
  });
});
