/**
 * deploy/: the Prometheus alert rules pass `promtool check rules` and their unit tests
 * (`promtool test rules`, each tested alert firing and not firing), the Grafana dashboard
 * parses, and every metric either of them names is one src/metrics registers, so renaming a
 * metric breaks this test instead of an operator's alert. The rules' expressions, `for` and
 * severity are quoted in docs/operations.md, and checked equal here. promtool comes from
 * Debian's prometheus package (`npm run tools` installs it when missing).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url);
const RULES = 'deploy/prometheus/converge-rules.yml';
const RULE_TESTS = 'deploy/prometheus/converge-rules.test.yml';
const DASHBOARD = 'deploy/grafana/converge-dashboard.json';
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');

/**
 * Metric names src/metrics registers (every `'converge_…'` literal there: a `name:` or the name a
 * helper gets); a histogram also answers to its _bucket, _sum and _count series.
 */
function knownMetrics(): Set<string> {
  const known = new Set<string>(['up']);
  const dir = new URL('src/metrics/', ROOT);
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    for (const [, name] of source.matchAll(/'(converge_[a-z0-9_]+)'/g)) known.add(name!);
    // A histogram made directly or through metrics/instruments.ts's histogram(registry, name, ...).
    const histograms = /(?:new client\.Histogram\(\{\s*name:|\bhistogram\(\s*[\w.]+,)\s*'(converge_[a-z0-9_]+)'/g;
    for (const [, name] of source.matchAll(histograms))
      for (const suffix of ['_bucket', '_sum', '_count']) known.add(name! + suffix);
  }
  return known;
}

/** The metric names in a PromQL expression that src/metrics does not register. */
function unknownMetrics(expr: string, known: Set<string>): string[] {
  const names = [...expr.matchAll(/\b(converge_[a-z0-9_]+|up)\b/g)].map((m) => m[1]!);
  return names.filter((name) => !known.has(name));
}

interface Rule {
  alert: string;
  expr: string;
  for: string;
  severity: string;
}

/** The rules file, read line by line: promtool checks its structure, this keeps each expression on one line. */
function rules(): Rule[] {
  const found: Rule[] = [];
  for (const line of read(RULES).split('\n')) {
    const alert = /^\s+- alert: (\S+)$/.exec(line);
    if (alert) found.push({ alert: alert[1]!, expr: '', for: '', severity: '' });
    const field = /^\s+(expr|for|severity): (.*)$/.exec(line);
    if (field && found.length > 0) found.at(-1)![field[1] as 'expr' | 'for' | 'severity'] = field[2]!;
  }
  return found;
}

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}

describe('deploy/ for Prometheus and Grafana', () => {
  it('promtool accepts the alert rules and their unit tests pass', async () => {
    const checked = await run('promtool', ['check', 'rules', RULES], { cwd: ROOT });
    assert.match(checked.stdout, new RegExp(`SUCCESS: ${rules().length} rules found`));
    const tested = await run('promtool', ['test', 'rules', RULE_TESTS], { cwd: ROOT });
    assert.match(tested.stdout, /SUCCESS/);
    // Each alert the unit tests name is tested both firing and not firing.
    const tests = read(RULE_TESTS);
    const named = new Set([...tests.matchAll(/alertname: (\S+)/g)].map((m) => m[1]!));
    assert.ok(named.size >= 2);
    for (const alert of named) {
      const cases = [...tests.matchAll(new RegExp(`alertname: ${alert}\\n\\s+exp_alerts:( \\[\\])?`, 'g'))];
      const silent = cases.filter((c) => c[1] !== undefined).length;
      const firing = cases.length - silent;
      assert.ok(silent > 0 && firing > 0, `${alert}: firing and not firing`);
    }
  });

  it('names only metrics that src/metrics registers, in the rules and the dashboard', () => {
    const known = knownMetrics();
    assert.ok(known.has('converge_outbox_oldest_pending_seconds') && known.has('converge_consumer_lag_seconds_bucket'));
    assert.deepEqual(
      unknownMetrics('converge_outbox_rowz > 0', known),
      ['converge_outbox_rowz'],
      'a renamed metric is caught',
    );
    for (const rule of rules()) {
      assert.ok(rule.expr.length > 0 && rule.for.length > 0 && rule.severity.length > 0, rule.alert);
      assert.deepEqual(unknownMetrics(rule.expr, known), [], `${rule.alert}: ${rule.expr}`);
    }

    const dashboard = JSON.parse(read(DASHBOARD)) as {
      title: string;
      panels: Panel[];
      templating: { list: { query?: string | { query: string } }[] };
    };
    const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
    assert.ok(panels.length >= 10);
    const exprs = panels.flatMap((panel) => {
      assert.ok((panel.targets ?? []).length > 0, `panel ${panel.title} has a query`);
      return panel.targets!.map((t) => t.expr);
    });
    for (const variable of dashboard.templating.list)
      if (typeof variable.query === 'object') exprs.push(variable.query.query);
    const used = new Set<string>();
    for (const expr of exprs) {
      assert.deepEqual(unknownMetrics(expr, known), [], expr);
      for (const [name] of expr.matchAll(/\bconverge_[a-z0-9_]+/g)) used.add(name.replace(/_(bucket|sum|count)$/, ''));
    }
    // The panels the runbook needs: backlog, oldest pending, publishes and failures, outcomes, lag, gaps, quarantine, blocked.
    for (const metric of [
      'converge_outbox_rows',
      'converge_outbox_oldest_pending_seconds',
      'converge_relay_published_total',
      'converge_relay_publish_failures_total',
      'converge_consumer_deliveries_total',
      'converge_consumer_lag_seconds',
      'converge_gap_aggregates',
      'converge_parked_events',
      'converge_consumer_quarantined_total',
      'converge_relay_broker_blocked',
    ])
      assert.ok(used.has(metric), `the dashboard shows ${metric}`);
  });

  it('docs/operations.md quotes every alert with its expression, for and severity', () => {
    const rows = new Map(
      read('docs/operations.md')
        .split('\n')
        .filter((line) => line.startsWith('| `Converge'))
        .map((line) => line.split('|').map((cell) => cell.trim()))
        .map((cells) => [cells[1]!.replaceAll('`', ''), cells]),
    );
    const all = rules();
    assert.equal(rows.size, all.length, 'one row per alert, no row for an alert that does not exist');
    for (const rule of all) {
      const row = rows.get(rule.alert);
      assert.ok(row, `docs/operations.md has a row for ${rule.alert}`);
      assert.deepEqual(row.slice(2, 5), [`\`${rule.expr}\``, rule.for, rule.severity], rule.alert);
    }
  });
});
